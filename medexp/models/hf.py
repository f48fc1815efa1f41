"""Scorer adapter for transformers image-text-to-text checkpoints (hub or local directory).

The same code loads a hub model (``Qwen/...``), a local ``save_pretrained`` directory and the
offline demo models, so the demo exercises the real loading and scoring path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from medexp.benchmarks.base import Example
from medexp.config.schemas import DType
from medexp.models.image_inputs import ImageInputs

log = logging.getLogger(__name__)

Item = TypeVar("Item")


@dataclass(frozen=True)
class Window:
    """A slice of a tokenised text scored in one forward pass."""

    text_index: int
    token_ids: list[int]
    first_target: int  # positions >= first_target (and >= 1) contribute log-probs


@dataclass(frozen=True)
class PreparedExample:
    """An example with its prompt and the token ids of its gold answer after that prompt."""

    example: Example
    prompt: str
    answer_ids: list[int]
    boundary_merged: bool


@dataclass(frozen=True)
class SharedPrefix:
    """Examples with one image whose model inputs begin with the same ``length`` tokens (the
    chat template's start, every image token, and whatever prompt text they share); each
    continuation is the rest of its prompt (at least one token, whose logits score the first
    answer token) followed by its answer."""

    items: list[PreparedExample]
    length: int
    continuations: list[list[int]]
    answer_starts: list[int]  # index in the continuation of the first answer token


@dataclass
class TokenCounts:
    """Tokens of scored examples: ``naive`` if each ran whole (image tokens, prompt, answer), and
    ``computed``, those that went through the model (a shared prefix counts once); and
    ``images_processed``, the images the image processor ran on (each example's own on the plain
    path; each distinct image once per scoring call on the shared-prefix path)."""

    naive: int = 0
    computed: int = 0
    images_processed: int = 0


class CheckpointScorer:
    """What every adapter shares: its settings checked, the checkpoint's architecture checked,
    processor and model loaded in the configured dtype and placed on the device, in eval mode."""

    # The transformers classes the family's checkpoints load with, and the config.model_type values
    # it accepts (empty: any); a checkpoint of another architecture fails with a clear message.
    PROCESSOR_CLASS: str = "AutoProcessor"
    MODEL_CLASS: str = "AutoModelForImageTextToText"
    MODEL_TYPES: tuple[str, ...] = ()
    # dtypes the family's weights are known to break in, with the reason.
    UNSUPPORTED_DTYPES: Mapping[str, str] = MappingProxyType({})

    def __init__(self, model_cfg, location: str, weights: bool = True):
        """``weights=False`` loads the processor alone (``self.model`` is None): what a prompt, its
        tokens and its image-token count need, for a checkpoint whose weights are not wanted
        (``python -m medexp.inspect --prompt``)."""
        import torch

        self.cfg = model_cfg
        self.location = location
        self._check_settings()
        dtype = getattr(torch, DType(model_cfg.dtype).value)
        self.device_map = model_cfg.device_map
        common = {"revision": model_cfg.revision, "trust_remote_code": bool(model_cfg.trust_remote_code)}
        try:
            self._check_model_type(location, common)
            if weights:
                self.processor, self.model = self.load(location, dtype, common)
            else:
                self.processor, self.model = self.load_processor(location, common), None
        except OSError as error:
            raise load_error(model_cfg.name, location, error) from error
        if self.model is None:
            self.device = "cpu"
            return
        if self.device_map is None:
            self.device = pick_device(model_cfg.device)
            self.model.to(self.device)
        else:
            # The layers may sit on several devices; inputs go where the embeddings are.
            self.device = self.model.get_input_embeddings().weight.device
        self.model.eval()

    # ------------------------------------------------------------------ checks
    @property
    def family(self) -> str:
        return getattr(self.cfg.family, "value", self.cfg.family)

    def _check_settings(self) -> None:
        name, dtype = self.cfg.name, DType(self.cfg.dtype).value
        if dtype in self.UNSUPPORTED_DTYPES:
            allowed = [d.value for d in DType if d.value not in self.UNSUPPORTED_DTYPES]
            raise ValueError(f"model={name}: dtype {dtype} is not supported by family {self.family!r} "
                             f"({self.UNSUPPORTED_DTYPES[dtype]}); use one of {allowed}")
        budget = self.cfg.token_budget
        if budget is not None and budget < 1:
            raise ValueError(f"model={name}: token_budget must be a positive number of tokens or null, got {budget}")
        if int(self.cfg.batch_size) < 1:
            raise ValueError(f"model={name}: batch_size must be >= 1, got {self.cfg.batch_size}")

    def _check_model_type(self, location: str, common: dict[str, Any]) -> None:
        """Refuse a checkpoint of another architecture before its weights are read."""
        if not self.MODEL_TYPES:
            return
        from transformers import AutoConfig

        model_type = getattr(AutoConfig.from_pretrained(location, **common), "model_type", None)
        if model_type not in self.MODEL_TYPES:
            raise ValueError(
                f"model={self.cfg.name}: {self.location!r} is a {model_type!r} checkpoint, but family "
                f"{self.family!r} loads {list(self.MODEL_TYPES)}; "
                "set `family` to the checkpoint's family (or generic)"
            )

    def load_processor(self, location: str, common: dict[str, Any]):
        """The checkpoint's processor (tokenizer, image processor, chat template), no weights."""
        import transformers

        return getattr(transformers, self.PROCESSOR_CLASS).from_pretrained(location, **common)

    def load(self, location: str, dtype, common: dict[str, Any]):
        """The processor and the model of a checkpoint (families name their classes)."""
        import transformers

        processor = self.load_processor(location, common)
        model_class = getattr(transformers, self.MODEL_CLASS)
        model = model_class.from_pretrained(location, dtype=dtype, device_map=self.device_map, **common)
        return processor, model


class ProcessorPrompts:
    """What a checkpoint's processor makes of examples and texts: an example's prompt and its gold
    answer's token ids after it, a text's scoring windows. Shared by every backend that scores a
    transformers checkpoint (HFScorer, and medexp.models.vllm_scorer, which loads no transformers
    model); needs ``cfg`` and ``processor``."""

    # Whether the family answers in its chat template when the config asks for one (the Q-Former
    # families were trained on plain prompt templates and never use one).
    CHAT_TEMPLATE: bool = True

    def _init_prompts(self) -> None:
        self.tokenizer = self.processor.tokenizer
        self.use_chat = bool(self.CHAT_TEMPLATE and self.cfg.use_chat_template
                             and getattr(self.processor, "chat_template", None))

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

    def _prepare(self, example: Example) -> PreparedExample:
        prompt = self.prompt(example)
        ids, merged = self.answer_ids(prompt, example.answer)
        if not ids:
            raise ValueError(f"{example.example_id}: the gold answer {example.answer!r} tokenises to nothing")
        return PreparedExample(example, prompt, ids, merged)

    def _text_windows(self, texts: Sequence[str], context_length: int, stride: int) -> list[Window]:
        """The scoring windows of every text, in order: at most ``context_length`` tokens each,
        advancing by ``stride`` tokens."""
        if not 0 < stride < context_length:
            # A window must carry at least one token of context into the next one.
            raise ValueError(f"need 0 < stride ({stride}) < context_length ({context_length})")
        return [w for index, text in enumerate(texts) for w in self._windows(index, text, context_length, stride)]

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


class HFScorer(ProcessorPrompts, CheckpointScorer):
    """Teacher-forced scoring of gold answers, and of raw text for the exchangeability test."""

    # Processor outputs aligned with input_ids that must be widened to cover the appended answer.
    # Everything else the processor returns (pixel_values, image_grid_thw, ...) passes unchanged.
    SEQUENCE_KEYS: tuple[str, ...] = ("token_type_ids", "mm_token_type_ids")
    # Why the family cannot score from a shared prefix's key/value cache (None: it can); such a
    # family ignores `shared_prefix` and runs every example whole.
    SHARED_PREFIX_UNSUPPORTED: str | None = None

    def __init__(self, model_cfg, location: str, weights: bool = True):
        super().__init__(model_cfg, location, weights)
        self._init_prompts()
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.shared_prefix = bool(model_cfg.shared_prefix) and self.SHARED_PREFIX_UNSUPPORTED is None
        self.token_counts = TokenCounts()
        # While a shared-prefix scoring call runs: the image processor's outputs by image content.
        self._images: ImageInputs | None = None

    # ------------------------------------------------------------------ family hooks
    def processor_inputs(self, prompts: list[str], images: list | None):
        """Model inputs of a batch of prompts (and their images), as the processor builds them."""
        # A chat template writes every special token itself (Gemma's writes <bos>), so the
        # tokenizer must not add its own: that would double them.
        kwargs: dict[str, Any] = {"text": prompts, "return_tensors": "pt", "padding": True,
                                  "add_special_tokens": not self.use_chat}
        if images is not None:
            kwargs["images"] = [[image] for image in images]  # one list per prompt: no ambiguity
        return self.processor(**kwargs)

    def answer_logits(self, inputs: dict[str, Any], answer_mask):
        """Logits of the positions that predict answer tokens (``answer_logit_mask``), one row per
        answer token, for a batch of prompt + answer rows.

        Only those hidden states go through the vocabulary projection (transformers'
        ``logits_to_keep``): projecting every prompt position costs as much as several decoder
        layers with a 150k vocabulary, and its logits were never read."""
        from medexp.scoring.teacher_forcing import answer_logit_mask, kept_positions, kept_rows

        keep = answer_logit_mask(answer_mask)
        positions = kept_positions(keep)
        return kept_rows(self.model(**inputs, logits_to_keep=positions).logits, keep, positions)

    def text_logits(self, input_ids, attention_mask):
        """Logits of text-only input (the exchangeability test scores text without images)."""
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits

    def prefix_positions(self, inputs: dict[str, Any]):
        """Position ids of a batch of left-padded prefixes, and each row's next position (where
        its continuation starts). Plain 1-D positions count the real tokens; families with
        their own position scheme (Qwen2.5-VL's multimodal rope) override this."""
        mask = inputs["attention_mask"]
        return (mask.cumsum(-1) - 1).clamp_min(0), mask.sum(-1)

    # ------------------------------------------------------------------ examples
    def score_examples(self, examples: Sequence[Example]) -> pd.DataFrame:
        """One row per example: per-token log-probs and Min-K%++ z of the gold answer.

        With ``shared_prefix``, examples sharing an image are scored from their common prefix's
        key/value cache (see :meth:`_score_shared`); the others, and all of them without it,
        run whole. On both paths the image processor's output of an image is kept while the
        examples asking about it are pending (:class:`medexp.models.image_inputs.ImageInputs`,
        counted in ``token_counts.images_processed``): with the questions about one image
        together, as benchmarks list them, each distinct image is processed once."""
        prepared = [self._prepare(ex) for ex in examples]
        self._images = ImageInputs()
        try:
            if self.shared_prefix:
                rows, alone = self._score_shared(prepared)
                rows.extend(self._score_whole(alone))
            else:
                rows = self._score_whole(prepared)
            self.token_counts.images_processed += self._images.processed
        finally:
            self._images = None
        order = {ex.example_id: i for i, ex in enumerate(examples)}
        rows.sort(key=lambda row: order[row["example_id"]])
        return pd.DataFrame(rows)

    def model_input(self, example: Example) -> tuple[PreparedExample, Any]:
        """The example's prompt and answer ids, and its prompt as the processor encodes it (image
        tokens expanded): what the model receives before the answer is appended."""
        item = self._prepare(example)
        return item, self._encode([item])

    def _encode(self, group: list[PreparedExample]):
        """The processor's inputs of a group of examples (all with an image, or none). During a
        scoring call the image processor's output of each image is kept by the image's content
        and reused (``self._images``); outside one (a prompt preview) the images are processed
        (and counted)."""
        from medexp.benchmarks.images import read_image

        prompts = [item.prompt for item in group]
        if group[0].example.image is None:
            return self.processor_inputs(prompts, None)
        if self._images is None:
            self.token_counts.images_processed += len(group)
            return self.processor_inputs(prompts, [read_image(item.example.image, "RGB") for item in group])
        keys = [self._image_key(item) for item in group]
        decoded: dict[str, Any] = {}  # an image asked twice in the group is read once
        for key, item in zip(keys, group):
            if key not in decoded:
                decoded[key] = self._images.image(key, item.example.image)
        images = [decoded[key] for key in keys]
        with self._images.serving(self.processor, keys):
            return self.processor_inputs(prompts, images)

    def _image_key(self, item: PreparedExample) -> str | None:
        """The identity of the example's image during a scoring call: its bytes' SHA-256."""
        return None if item.example.image is None else self._images.key(item.example.image)

    def _input_length(self, item: PreparedExample) -> int:
        """Tokens of the example's model input: its prompt as the processor expands it (image
        tokens included), then its answer."""
        return int(self._encode([item])["attention_mask"].sum()) + len(item.answer_ids)

    def _score_whole(self, items: list[PreparedExample]) -> list[dict[str, Any]]:
        """Rows of examples run whole, in batches (:meth:`_each_batch`)."""
        rows: list[dict[str, Any]] = []

        def run(batch: list[PreparedExample]) -> None:
            # Image and text-only examples cannot share a processor call.
            for group in (
                [item for item in batch if item.example.image is not None],
                [item for item in batch if item.example.image is None],
            ):
                if group:
                    rows.extend(self._score_group(group))

        self._each_batch(items, int(self.cfg.batch_size), self._input_length, self._image_key, run)
        return rows

    def _each_batch(self, items: Iterable[Item], batch_size: int, length: Callable[[Item], int],
                    image_key: Callable[[Item], str | None], run: Callable[[list[Item]], None]) -> None:
        """``run`` on the batches :func:`batches` makes of ``items``, each as soon as it is
        complete, so ``items`` may be produced as they are needed. Once a batch has run, kept
        images are released but the one of the item starting the next batch (``image_key``), whose
        length may already have needed it."""
        for batch, following in batches(items, batch_size, self.cfg.token_budget, length, self.cfg.name):
            run(batch)
            self._images.retain(() if following is None else {image_key(following)})

    def _batches(self, items: list[Item], batch_size: int, length: Callable[[Item], int]) -> list[list[Item]]:
        """The batches :func:`batches` makes of ``items``, all at once."""
        return [batch for batch, _ in batches(items, batch_size, self.cfg.token_budget, length, self.cfg.name)]

    def _score_group(self, group: list[PreparedExample]) -> list[dict[str, Any]]:
        import torch

        from medexp.scoring.teacher_forcing import answer_token_scores

        encoded = self._encode(group)
        inputs, answer_mask = _append_answers(encoded, [item.answer_ids for item in group], self.pad_id,
                                              self.SEQUENCE_KEYS)
        inputs = {key: value.to(self.device) if torch.is_tensor(value) else value for key, value in inputs.items()}
        answer_mask = answer_mask.to(self.device)
        with torch.inference_mode():
            logits = self.answer_logits(inputs, answer_mask)
        token_logprobs, token_z = answer_token_scores(logits, inputs["input_ids"], answer_mask)
        tokens = int(inputs["attention_mask"].sum())
        self.token_counts.naive += tokens
        self.token_counts.computed += tokens
        return self._rows(group, token_logprobs, token_z)

    @staticmethod
    def _rows(group: list[PreparedExample], token_logprobs, token_z) -> list[dict[str, Any]]:
        return [answer_row(item, logprob.cpu().numpy(), z.cpu().numpy().tolist())
                for item, logprob, z in zip(group, token_logprobs, token_z)]

    # ------------------------------------------------------------------ shared prefixes
    def _score_shared(self, prepared: list[PreparedExample]) -> tuple[list[dict[str, Any]], list[PreparedExample]]:
        """Rows of the examples that share a prefix with another one, and the examples left to run
        whole (text only, or alone with their image), in order.

        Examples are grouped by their image's content (:meth:`_image_key`); a group's prefixes
        are found (:meth:`_image_prefixes`) when the batches of prefixes reach it, its examples
        outside every prefix run whole right then, and each batch of prefixes runs as soon as it
        is complete (:meth:`_score_prefixes`). So an image's pixels are kept from the search for
        its prefixes until its last prefix has run, and each distinct image goes through the image
        processor once, while no more than a batch's images are kept at a time."""
        by_image: dict[str, list[PreparedExample]] = {}
        for item in prepared:
            if item.example.image is not None:
                by_image.setdefault(self._image_key(item), []).append(item)
        groups = [items for items in by_image.values() if len(items) > 1]
        grouped = {id(item) for items in groups for item in items}
        rows: list[dict[str, Any]] = []
        batch_size = int(self.cfg.batch_size)

        def prefixes() -> Iterator[SharedPrefix]:
            for items in groups:
                found = self._image_prefixes(items)
                covered = {id(item) for prefix in found for item in prefix.items}
                for batch in self._batches([item for item in items if id(item) not in covered], batch_size,
                                           self._input_length):
                    rows.extend(self._score_group(batch))
                yield from found

        self._each_batch(prefixes(), batch_size, lambda prefix: prefix.length,
                         lambda prefix: self._image_key(prefix.items[0]),
                         lambda batch: rows.extend(self._score_prefixes(batch)))
        return rows, [item for item in prepared if id(item) not in grouped]

    def _image_prefixes(self, items: list[PreparedExample]) -> list[SharedPrefix]:
        """The prefixes of one image's examples: one for all, or one per distinct prompt,
        whichever computes fewer tokens (an example outside every prefix counts whole).

        A prefix is the longest common start of its examples' processor-expanded input ids,
        shortened to leave each continuation at least one prompt token; it must hold every image
        token (and every token a per-token processor output marks), because only the prefix pass
        sees the pixels. option_order asks each prompt once per option letter: the whole prompt
        is then the prefix. The ids come from the processor, whose image processor runs on the
        image once during a shared-prefix call (:meth:`_encode`)."""
        prompts: list[list[int]] = []
        marked: list[list[list[int]]] = []
        batch_size = int(self.cfg.batch_size)
        # batch_size examples per processor call: each carries its own copy of the image's pixels.
        for start in range(0, len(items), batch_size):
            encoded = self._encode(items[start : start + batch_size])
            mask = encoded["attention_mask"].bool()
            for row in range(len(mask)):
                prompts.append(encoded["input_ids"][row][mask[row]].tolist())
                marked.append([encoded[key][row][mask[row]].tolist() for key in self.SEQUENCE_KEYS if key in encoded])
        by_prompt: dict[tuple[int, ...], list[int]] = {}
        for row, ids in enumerate(prompts):
            by_prompt.setdefault(tuple(ids), []).append(row)
        options = [[list(range(len(items)))], [rows for rows in by_prompt.values() if len(rows) > 1]]
        whole = [len(ids) + len(item.answer_ids) for ids, item in zip(prompts, items)]

        def computed(prefixes: list[SharedPrefix]) -> int:
            covered = {id(item) for prefix in prefixes for item in prefix.items}
            return (sum(prefix.length + sum(map(len, prefix.continuations)) for prefix in prefixes)
                    + sum(n for n, item in zip(whole, items) if id(item) not in covered))

        candidates = [[prefix for rows in option if (prefix := self._prefix(items, prompts, marked, rows))]
                      for option in options]
        return min(candidates, key=computed)

    def _prefix(self, items, prompts: list[list[int]], marked: list[list[list[int]]], rows: list[int]):
        """The shared prefix of ``rows`` of an image's examples, or None if they have none."""
        length = min(len(prompts[row]) for row in rows) - 1
        first = prompts[rows[0]]
        for row in rows[1:]:
            length = next((index for index in range(length) if prompts[row][index] != first[index]), length)
        image_token = getattr(self.model.config, "image_token_id", None)
        if (length < 1 or any(image_token in prompts[row][length:] for row in rows)
                or any(any(values[length:]) for row in rows for values in marked[row])):
            return None
        return SharedPrefix([items[row] for row in rows], length,
                            [prompts[row][length:] + items[row].answer_ids for row in rows],
                            [len(prompts[row]) - length for row in rows])

    def _score_prefixes(self, batch: list[SharedPrefix]) -> list[dict[str, Any]]:
        """Rows of the examples of a batch of prefixes: the prefixes run once with the pixels
        (left-padded, so that each prefix's last token sits next to its continuation and every
        key/value sits at its real distance from the queries), then the continuations run in
        batches from a copy of their prefix's cache rows."""
        rows: list[dict[str, Any]] = []
        cache, attention, next_position = self._run_prefixes(batch)
        self.token_counts.computed += sum(prefix.length for prefix in batch)
        members = [(index, member) for index, prefix in enumerate(batch) for member in range(len(prefix.items))]
        for chunk in self._batches(members, int(self.cfg.batch_size),
                                   lambda pair: len(batch[pair[0]].continuations[pair[1]])):
            rows.extend(self._score_continuations(batch, chunk, cache, attention, next_position))
        return rows

    def _run_prefixes(self, batch: list[SharedPrefix]):
        """The key/value cache of a batch of prefixes (left-padded), their attention mask and
        the position each continuation starts at."""
        import torch

        encoded = self._encode([prefix.items[0] for prefix in batch])
        mask = encoded["attention_mask"].bool()
        width = max(prefix.length for prefix in batch)
        per_token = [key for key in ("input_ids", *self.SEQUENCE_KEYS) if key in encoded]
        padded = {key: torch.zeros((len(batch), width), dtype=encoded[key].dtype) for key in per_token}
        padded["input_ids"].fill_(self.pad_id)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, prefix in enumerate(batch):
            for key in per_token:
                padded[key][row, width - prefix.length :] = encoded[key][row][mask[row]][: prefix.length]
            attention[row, width - prefix.length :] = 1
        inputs = {key: value for key, value in encoded.items() if key not in ("input_ids", "attention_mask")}
        inputs.update(padded, attention_mask=attention)
        inputs = {key: value.to(self.device) if torch.is_tensor(value) else value for key, value in inputs.items()}
        position_ids, next_position = self.prefix_positions(inputs)
        with torch.inference_mode():
            # Only the cache is needed: the language-model head runs on the last position alone.
            output = self.model(**inputs, position_ids=position_ids, use_cache=True, logits_to_keep=1)
        return output.past_key_values, inputs["attention_mask"], next_position

    def _score_continuations(self, batch: list[SharedPrefix], chunk: list[tuple[int, int]], cache, prefix_attention,
                             next_position) -> list[dict[str, Any]]:
        import torch

        from medexp.scoring.teacher_forcing import answer_token_scores

        continuations = [batch[index].continuations[member] for index, member in chunk]
        width = max(len(ids) for ids in continuations)
        input_ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(chunk), width), dtype=torch.long)
        answer_mask = torch.zeros((len(chunk), width), dtype=torch.bool)
        for row, ((index, member), ids) in enumerate(zip(chunk, continuations)):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
            answer_mask[row, batch[index].answer_starts[member] : len(ids)] = True
        owners = torch.tensor([index for index, _ in chunk], device=self.device)
        input_ids, answer_mask = input_ids.to(self.device), answer_mask.to(self.device)
        # The mask covers the prefix's cached slots (their left padding masked), then the continuation.
        attention = torch.cat([prefix_attention[owners], attention.to(self.device)], dim=1)
        positions = next_position[owners][:, None] + torch.arange(width, device=self.device)
        inputs = {"input_ids": input_ids, "attention_mask": attention, "position_ids": positions,
                  "past_key_values": cache_rows(cache, owners), "use_cache": True}
        with torch.inference_mode():
            logits = self.answer_logits(inputs, answer_mask)
        token_logprobs, token_z = answer_token_scores(logits, input_ids, answer_mask)
        self.token_counts.computed += sum(len(ids) for ids in continuations)
        self.token_counts.naive += sum(batch[index].length + len(ids) for (index, _), ids in zip(chunk, continuations))
        return self._rows([batch[index].items[member] for index, member in chunk], token_logprobs, token_z)

    # ------------------------------------------------------------------ generation
    def generate(self, examples: Sequence[Example], max_new_tokens: int) -> list[str]:
        """Greedy continuations of each example's prompt (its answer is ignored), decoded without
        special tokens. One example at a time, so padding can never change a reply."""
        import torch

        replies = []
        for example in examples:
            inputs = self._encode([PreparedExample(example, self.prompt(example), [], False)])
            inputs = {key: value.to(self.device) if torch.is_tensor(value) else value for key, value in inputs.items()}
            with torch.inference_mode():
                output = self.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                             pad_token_id=self.pad_id)
            prompt_ids = inputs["input_ids"][0]
            tokens = output[0]
            # Decoder-only models return the prompt first; some encoder-side families do not.
            if len(tokens) >= len(prompt_ids) and torch.equal(tokens[: len(prompt_ids)].cpu(), prompt_ids.cpu()):
                tokens = tokens[len(prompt_ids) :]
            replies.append(self.tokenizer.decode(tokens, skip_special_tokens=True).strip())
        return replies

    # ------------------------------------------------------------------ raw text
    def score_texts(self, texts: Sequence[str], context_length: int, stride: int, batch_size: int) -> np.ndarray:
        """Total log-likelihood of each text under the language model (no image).

        Texts longer than ``context_length`` tokens are scored with a sliding window that
        advances by ``stride`` tokens; each token is scored once, with up to
        ``context_length - stride`` tokens of left context carried over.
        """
        import torch

        from medexp.scoring.teacher_forcing import sequence_logprobs

        windows = self._text_windows(texts, context_length, stride)
        totals = np.zeros(len(texts), dtype=np.float64)
        for chunk in self._batches(windows, batch_size, lambda window: len(window.token_ids)):
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


def answer_row(item: PreparedExample, token_logprobs: np.ndarray, token_z: list[float]) -> dict[str, Any]:
    """An example's row of a score table: its gold answer's per-token log-probs and Min-K%++ z."""
    return {
        "example_id": item.example.example_id,
        "position": item.example.position,
        "n_answer_tokens": len(item.answer_ids),
        "token_logprobs": token_logprobs.tolist(),
        "token_minkpp_z": token_z,
        "sum_logprob": float(token_logprobs.sum()),
        "mean_logprob": float(token_logprobs.mean()),
        "boundary_merged": item.boundary_merged,
    }


def batches(items: Iterable[Item], batch_size: int, budget: int | None, length: Callable[[Item], int],
            model_name: str) -> Iterator[tuple[list[Item], Item | None]]:
    """Consecutive batches of ``items``, each yielded as soon as it is complete with the item that
    starts the next one (None after the last): of ``batch_size`` rows, or with a token ``budget``
    as many rows as keep rows x longest ``length`` within it (lengths are only computed then).

    Greedy in order (the given order is kept, nothing is sorted); an input longer than the budget
    forms a batch of its own, and how many did is logged once the items are used up.
    """
    current: list[Item] = []
    longest = oversized = 0
    for item in items:
        if budget is None:
            full, size = len(current) == batch_size, 0
        else:
            size = length(item)
            oversized += size > budget
            full = bool(current) and (len(current) + 1) * max(longest, size) > budget
        if full:
            yield current, item
            current, longest = [], 0
        current.append(item)
        longest = max(longest, size)
    if current:
        yield current, None
    if oversized:
        log.warning("model=%s: %d inputs are longer than token_budget=%d and are scored alone",
                    model_name, oversized, budget)


def cache_rows(cache, rows):
    """A key/value cache holding the given batch rows of ``cache`` (repeats allowed); ``cache``
    itself is left as it is, so later continuations start from the same prefixes."""
    import copy

    selected = copy.copy(cache)
    selected.layers = [copy.copy(layer) for layer in cache.layers]
    for layer in selected.layers:
        if layer.is_initialized:  # with a device map, each layer's cache sits on its layer's device
            layer.batch_select_indices(rows.to(layer.keys.device))
    return selected


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


_GATED_HELP = (
    "accept the licence on https://huggingface.co/{location} with your account, then log in "
    "(`huggingface-cli login`, or set HF_TOKEN), or download the checkpoint where you have access "
    "and set model.pretrained=/local/dir"
)


def load_error(name: str, location: str, error: BaseException) -> OSError:
    """The error to raise when a checkpoint cannot be loaded, with what to do about it.

    A gated repository (MedGemma) or a refused token (HTTP 401/403) gets instructions for access;
    anything else, how to load the checkpoint from a local copy.
    """
    if _access_denied(error):
        return OSError(f"model={name}: {location!r} is a gated or private repository and this machine has no "
                       f"access to it ({type(error).__name__}). To use it, {_GATED_HELP.format(location=location)}.")
    return OSError(
        f"model={name}: cannot load {location!r} ({error}). Without hub access, download the "
        f"checkpoint elsewhere (huggingface-cli download {location}) and set model.pretrained=/local/dir"
    )


def _access_denied(error: BaseException | None) -> bool:
    """Whether the error, or one it was raised from, is the hub refusing access."""
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError

    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, GatedRepoError):
            return True
        response = getattr(error, "response", None) if isinstance(error, HfHubHTTPError) else None
        if getattr(response, "status_code", None) in (401, 403):
            return True
        error = error.__cause__ or error.__context__
    return False


def pick_device(requested: str) -> str:
    """The torch device to load on: ``requested``, or for "auto" cuda when there is one, else cpu."""
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return requested
