"""Scorer adapter for transformers image-text-to-text checkpoints (hub or local directory).

The same code loads a hub model (``Qwen/...``), a local ``save_pretrained`` directory and the
offline demo models, so the demo exercises the real loading and scoring path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from medexp.benchmarks.base import Example
from medexp.config.schemas import DType

# Bump when a change alters any score, so cached tables are recomputed.
SCORING_VERSION = "scoring-v1"


@dataclass(frozen=True)
class Window:
    """A slice of a tokenised text scored in one forward pass."""

    text_index: int
    token_ids: list[int]
    first_target: int  # positions >= first_target (and >= 1) contribute log-probs


class HFScorer:
    """Teacher-forced scoring of gold answers, and of raw text for the exchangeability test."""

    # Processor outputs aligned with input_ids that must be widened to cover the appended answer.
    # Everything else the processor returns (pixel_values, image_grid_thw, ...) passes unchanged.
    SEQUENCE_KEYS: tuple[str, ...] = ("token_type_ids", "mm_token_type_ids")

    def __init__(self, model_cfg, location: str):
        import torch

        self.cfg = model_cfg
        self.location = location
        self.device = _pick_device(model_cfg.device)
        dtype = getattr(torch, DType(model_cfg.dtype).value)
        common = {"revision": model_cfg.revision, "trust_remote_code": bool(model_cfg.trust_remote_code)}
        try:
            self.processor, self.model = self.load(location, dtype, common)
        except OSError as error:
            raise OSError(
                f"model={model_cfg.name}: cannot load {location!r} ({error}). Without hub access, download the "
                f"checkpoint elsewhere (huggingface-cli download {location}) and set model.pretrained=/local/dir"
            ) from error
        self.model.to(self.device).eval()
        self.tokenizer = self.processor.tokenizer
        self.use_chat = bool(model_cfg.use_chat_template and getattr(self.processor, "chat_template", None))
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    # ------------------------------------------------------------------ family hooks
    def load(self, location: str, dtype, common: dict[str, Any]):
        """The processor and the model of a checkpoint (families override the classes)."""
        from transformers import AutoModelForImageTextToText, AutoProcessor

        processor = AutoProcessor.from_pretrained(location, **common)
        model = AutoModelForImageTextToText.from_pretrained(location, dtype=dtype, **common)
        return processor, model

    def processor_inputs(self, prompts: list[str], images: list | None):
        """Model inputs of a batch of prompts (and their images), as the processor builds them."""
        kwargs: dict[str, Any] = {"text": prompts, "return_tensors": "pt", "padding": True}
        if images is not None:
            kwargs["images"] = images
        return self.processor(**kwargs)

    def text_logits(self, input_ids, attention_mask):
        """Logits of text-only input (the exchangeability test scores text without images)."""
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits

    # ------------------------------------------------------------------ prompts
    def prompt(self, example: Example) -> str:
        text = self.cfg.prompt_template.format(question=example.question)
        if not self.use_chat:
            # Without a chat template the image placeholder (if the processor has one) leads.
            image_token = getattr(self.processor, "image_token", None)
            return f"{image_token}\n{text}" if example.image is not None and image_token else text
        content: list[dict[str, Any]] = [{"type": "image"}] if example.image is not None else []
        content.append({"type": "text", "text": text})
        messages = [{"role": "user", "content": content}]
        return self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def answer_ids(self, prompt: str, answer: str) -> tuple[list[int], bool]:
        """Token ids of the answer as the model sees it after the prompt, and whether BPE merged
        across the prompt/answer boundary (then the answer is tokenised on its own)."""
        joiner = "" if self.use_chat or prompt.endswith((" ", "\n")) else " "
        prompt_ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        full_ids = self.tokenizer(prompt + joiner + answer, add_special_tokens=False)["input_ids"]
        if full_ids[: len(prompt_ids)] == prompt_ids:
            return full_ids[len(prompt_ids) :], False
        return self.tokenizer(joiner + answer, add_special_tokens=False)["input_ids"], True

    # ------------------------------------------------------------------ examples
    def score_examples(self, examples: Sequence[Example]) -> pd.DataFrame:
        """One row per example: per-token log-probs and Min-K%++ z of the gold answer."""
        rows: list[dict[str, Any]] = []
        size = max(1, int(self.cfg.batch_size))
        for start in range(0, len(examples), size):
            batch = list(examples[start : start + size])
            # Image and text-only examples cannot share a processor call.
            for group in (
                [ex for ex in batch if ex.image is not None],
                [ex for ex in batch if ex.image is None],
            ):
                if group:
                    rows.extend(self._score_group(group))
        order = {ex.example_id: i for i, ex in enumerate(examples)}
        rows.sort(key=lambda row: order[row["example_id"]])
        return pd.DataFrame(rows)

    def _score_group(self, group: list[Example]) -> list[dict[str, Any]]:
        import torch

        from medexp.scoring.teacher_forcing import answer_token_scores

        prompts = [self.prompt(ex) for ex in group]
        answers = [self.answer_ids(p, ex.answer) for p, ex in zip(prompts, group)]
        for ex, (ids, _) in zip(group, answers):
            if not ids:
                raise ValueError(f"{ex.example_id}: the gold answer {ex.answer!r} tokenises to nothing")
        images = [_open_rgb(ex.image) for ex in group] if group[0].image is not None else None
        encoded = self.processor_inputs(prompts, images)
        inputs, answer_mask = _append_answers(encoded, [ids for ids, _ in answers], self.pad_id, self.SEQUENCE_KEYS)
        inputs = {key: value.to(self.device) if torch.is_tensor(value) else value for key, value in inputs.items()}
        with torch.inference_mode():
            logits = self.model(**inputs).logits
        token_logprobs, token_z = answer_token_scores(logits, inputs["input_ids"], answer_mask.to(self.device))
        rows = []
        for ex, (ids, merged), logprob, z in zip(group, answers, token_logprobs, token_z):
            values = logprob.cpu().numpy()
            rows.append(
                {
                    "example_id": ex.example_id,
                    "position": ex.position,
                    "n_answer_tokens": len(ids),
                    "token_logprobs": values.tolist(),
                    "token_minkpp_z": z.cpu().numpy().tolist(),
                    "sum_logprob": float(values.sum()),
                    "mean_logprob": float(values.mean()),
                    "boundary_merged": merged,
                }
            )
        return rows

    # ------------------------------------------------------------------ raw text
    def score_texts(self, texts: Sequence[str], context_length: int, stride: int, batch_size: int) -> np.ndarray:
        """Total log-likelihood of each text under the language model (no image).

        Texts longer than ``context_length`` tokens are scored with a sliding window that
        advances by ``stride`` tokens; each token is scored once, with up to
        ``context_length - stride`` tokens of left context carried over.
        """
        import torch

        from medexp.scoring.teacher_forcing import sequence_logprobs

        if not 0 < stride < context_length:
            # A window must carry at least one token of context into the next one.
            raise ValueError(f"need 0 < stride ({stride}) < context_length ({context_length})")
        windows = [w for index, text in enumerate(texts) for w in self._windows(index, text, context_length, stride)]
        totals = np.zeros(len(texts), dtype=np.float64)
        for start in range(0, len(windows), batch_size):
            chunk = windows[start : start + batch_size]
            width = max(len(w.token_ids) for w in chunk)
            input_ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
            attention = torch.zeros((len(chunk), width), dtype=torch.long)
            targets = torch.zeros((len(chunk), width), dtype=torch.bool)
            for row, window in enumerate(chunk):
                n = len(window.token_ids)
                input_ids[row, :n] = torch.tensor(window.token_ids)
                attention[row, :n] = 1
                targets[row, max(1, window.first_target) : n] = True
            with torch.inference_mode():
                logits = self.text_logits(input_ids.to(self.device), attention.to(self.device))
            sums = sequence_logprobs(logits, input_ids.to(self.device), targets.to(self.device)).cpu().numpy()
            for window, value in zip(chunk, sums):
                totals[window.text_index] += value
        return totals

    def _windows(self, index: int, text: str, context_length: int, stride: int) -> list[Window]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if self.tokenizer.bos_token_id is not None:
            ids = [self.tokenizer.bos_token_id] + ids
        if len(ids) <= context_length:
            return [Window(index, ids, 1)]
        windows, scored_until, begin = [], 1, 0
        while scored_until < len(ids):
            end = min(begin + context_length, len(ids))
            windows.append(Window(index, ids[begin:end], scored_until - begin))
            scored_until = end
            begin += stride
        return windows


def _append_answers(encoded, answer_ids: list[list[int]], pad_id: int, sequence_keys: tuple[str, ...]):
    """Model inputs of prompt + answer per row, right-padded, and the mask of answer tokens.

    The prompts come from the processor (image tokens expanded, either padding side); right
    padding keeps every real token at the same position whatever else is in the batch.
    """
    import torch

    prompt_ids, prompt_mask = encoded["input_ids"], encoded["attention_mask"].bool()
    lengths = prompt_mask.sum(dim=1).tolist()
    rows, width = len(answer_ids), max(n + len(ids) for n, ids in zip(lengths, answer_ids))
    input_ids = torch.full((rows, width), pad_id, dtype=prompt_ids.dtype)
    attention = torch.zeros((rows, width), dtype=torch.long)
    answer_mask = torch.zeros((rows, width), dtype=torch.bool)
    # Per-token processor outputs (token_type_ids, ...) are widened to cover the answer;
    # answer tokens are plain text, type 0.
    per_token = {key: torch.zeros((rows, width), dtype=encoded[key].dtype) for key in sequence_keys if key in encoded}
    for row, (length, ids) in enumerate(zip(lengths, answer_ids)):
        end = length + len(ids)
        input_ids[row, :length] = prompt_ids[row][prompt_mask[row]]
        input_ids[row, length:end] = torch.tensor(ids, dtype=prompt_ids.dtype)
        attention[row, :end] = 1
        answer_mask[row, length:end] = True
        for key, value in per_token.items():
            value[row, :length] = encoded[key][row][prompt_mask[row]]
    inputs = {key: value for key, value in encoded.items() if key not in ("input_ids", "attention_mask")}
    inputs.update(per_token, input_ids=input_ids, attention_mask=attention)
    return inputs, answer_mask


def _pick_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return requested


def _open_rgb(path):
    from PIL import Image

    with Image.open(path) as image:
        return image.convert("RGB")
