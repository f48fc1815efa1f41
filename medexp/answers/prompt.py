"""One prompt wording for every arm of every answering detector.

A probe is rendered from the cell's ``answer`` section (:class:`medexp.config.schemas.AnswerConfig`)
and nothing else, so the two arms of a comparison (original and shuffled options, original and
back-translated caption, image and no image) differ only in what their probes differ in.
"""

from __future__ import annotations

import base64
from pathlib import Path

# File signatures of the image formats chat APIs accept as data URLs; anything else is re-encoded as PNG.
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def render_prompt(probe, answer_cfg) -> str:
    """The text put to the model for ``probe`` (a :class:`medexp.probes.Probe`)."""
    if probe.is_choice:
        letters = probe.shown_labels
        lines = "\n".join(answer_cfg.option_line.format(letter=letter, text=text)
                          for letter, text in zip(letters, probe.options))
        return answer_cfg.choice_template.format(question=probe.question, options=lines, letters=", ".join(letters))
    return answer_cfg.free_text_template.format(question=probe.question)


def image_data_url(path: str | Path) -> str:
    """The image as a ``data:`` URL: PNG, JPEG and GIF files are sent byte for byte, WebP too;
    other formats (BMP, TIFF, ...) are re-encoded losslessly as PNG."""
    data = Path(path).read_bytes()
    mime = next((mime for magic, mime in _SIGNATURES if data.startswith(magic)), None)
    if mime is None and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        mime = "image/webp"
    if mime is None:
        import io

        from PIL import Image

        try:
            with Image.open(io.BytesIO(data)) as image:
                buffer = io.BytesIO()
                image.save(buffer, format="PNG")
        except Exception as error:
            raise ValueError(f"{path}: not an image PIL can read ({error})") from error
        data, mime = buffer.getvalue(), "image/png"
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def render_messages(probe, answer_cfg) -> list[dict]:
    """The probe as chat-completions messages: the system turn when configured, then one user
    turn holding the image (a base64 data URL) before the prompt text. A text-only probe's user
    turn is the prompt string alone, with no image part."""
    messages = []
    if answer_cfg.system_prompt is not None:
        messages.append({"role": "system", "content": answer_cfg.system_prompt})
    text = render_prompt(probe, answer_cfg)
    if probe.image is None:
        messages.append({"role": "user", "content": text})
    else:
        messages.append({"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": image_data_url(probe.image)}},
            {"type": "text", "text": text},
        ]})
    return messages


def chat_request(probe, answer_cfg, model: str) -> dict:
    """The chat-completions request body asking ``probe`` of ``model`` (the served id): the
    messages, the temperature as configured (0 unless sampling is allowed), ``max_tokens``, one
    choice, no streaming, and the seed when configured. The client sends it; a Batch export
    writes it."""
    body = {
        "model": model,
        "messages": render_messages(probe, answer_cfg),
        "temperature": float(answer_cfg.temperature),
        "max_tokens": int(answer_cfg.max_new_tokens),
        "n": 1,
        "stream": False,
    }
    if answer_cfg.seed is not None:
        body["seed"] = int(answer_cfg.seed)
    return body
