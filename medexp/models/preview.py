"""What a checkpoint's processor makes of one example, without loading its weights: the prompt the
family's adapter writes, the tokens the model would receive, how many of them stand for the image
and which are the gold answer's. ``python -m medexp.inspect model=<name> --prompt`` prints it, so a
user with hub access can compare a real checkpoint with what the tests pin on tiny ones
(tests/models/test_published_processing.py).
"""

from __future__ import annotations

from itertools import groupby
from pathlib import Path
from typing import Any

from medexp.benchmarks.base import Example


# The example a prompt or a cost is shown for unless one is given: a SLAKE-En test question on a
# square image of SLAKE's usual size, gray (only the size matters to a processor's token count).
DEFAULT_QUESTION, DEFAULT_ANSWER, DEFAULT_SIDE = "What modality is used to take this image?", "CT", 512


def default_example(workdir: Path) -> Example:
    """The default example, its image written under ``workdir``."""
    from PIL import Image

    image = workdir / "gray.png"
    Image.new("RGB", (DEFAULT_SIDE, DEFAULT_SIDE), (128, 128, 128)).save(image)
    return Example("preview::default::0", 0, image, DEFAULT_QUESTION, DEFAULT_ANSWER)


def prompt_preview(model_cfg, location: str, example: Example) -> dict[str, Any]:
    """The adapter's prompt for ``example`` and its token counts under the checkpoint's processor.

    Only the processor and the config are read (a few small files); the family's adapter builds
    the prompt and the answer ids exactly as when it scores.
    """
    from transformers import AutoConfig

    from medexp.models import scorer_class

    family = getattr(model_cfg.family, "value", model_cfg.family)
    scorer = scorer_class(family)(model_cfg, location, weights=False)
    item, encoded = scorer.model_input(example)
    input_ids = encoded["input_ids"][0][encoded["attention_mask"][0].bool()].tolist()
    config = AutoConfig.from_pretrained(location, revision=model_cfg.revision,
                                        trust_remote_code=bool(model_cfg.trust_remote_code))
    image_token_id = _image_token_id(config)
    in_input = sum(token == image_token_id for token in input_ids) if image_token_id is not None else 0
    # Remote-code BLIP-2 descendants (CheXagent) add their query embeddings inside forward, in
    # front of input_ids: the model sees them although the processor wrote no placeholder.
    prepended = getattr(config, "num_query_tokens", 0) if example.image is not None and not in_input else 0
    tokenizer = scorer.tokenizer
    return {
        "model": model_cfg.name,
        "family": family,
        "checkpoint": location,
        "revision": model_cfg.revision,
        "processor": type(scorer.processor).__name__,
        "image_processor": type(getattr(scorer.processor, "image_processor", None)).__name__,
        "chat_template": scorer.use_chat,
        "image": None if example.image is None else str(example.image),
        "question": example.question,
        "answer": example.answer,
        "prompt": item.prompt,
        "prompt_tokens": len(input_ids),
        "image_tokens": in_input + prepended,
        "image_tokens_prepended_by_model": prepended,
        "text_tokens": len(input_ids) - in_input,
        "answer_token_ids": item.answer_ids,
        "answer_tokens": tokenizer.convert_ids_to_tokens(item.answer_ids),
        "n_answer_tokens": len(item.answer_ids),
        "boundary_merged": item.boundary_merged,
        "total_tokens": len(input_ids) + prepended + len(item.answer_ids),
        "vision_patches": _vision_patches(encoded, config),
        # Where a shared prefix at least reaches: the image's last token (the prompt's start and
        # every image token are the same for all questions on an image); None without image tokens.
        "image_prefix_tokens": (max(index for index, token in enumerate(input_ids) if token == image_token_id) + 1
                                if in_input else None),
        "shared_prefix": scorer.shared_prefix,
        "prompt_tokens_decoded": _decoded(tokenizer, input_ids, image_token_id),
    }


def _vision_patches(encoded, config) -> int:
    """How many patches the image tower reads for the example: one per row of Qwen2.5-VL's
    flattened patches, else the pixels of every tile (or crop) over the tower's patch size."""
    pixels = encoded.get("pixel_values")
    if pixels is None:
        return 0
    if pixels.dim() == 2:
        return int(pixels.shape[0])
    patch = getattr(getattr(config, "vision_config", None), "patch_size", None)
    if patch is None:
        return 0
    patch_h, patch_w = (patch, patch) if isinstance(patch, int) else patch
    height, width = pixels.shape[-2:]
    return int(pixels.shape[:-3].numel()) * (height // patch_h) * (width // patch_w)


def _decoded(tokenizer, input_ids: list[int], image_token_id: int | None) -> str:
    """The prompt's tokens as text, each run of image tokens written once with its length
    (``<image>×3699``) so that the text around them stays readable."""
    parts = []
    for is_image, run in groupby(input_ids, key=lambda token: token == image_token_id):
        run = list(run)
        parts.append(f"{tokenizer.convert_ids_to_tokens(run[0])}×{len(run)}" if is_image else tokenizer.decode(run))
    return "".join(parts)


def _image_token_id(config) -> int | None:
    """The id of the token that stands for one image feature in input_ids, as the config names it
    (transformers' classes call it image_token_id, older configs image_token_index)."""
    for name in ("image_token_id", "image_token_index"):
        value = getattr(config, name, None)
        if value is not None:
            return int(value)
    return None
