"""Teacher-forced scoring through vLLM's offline engine (``model.backend=vllm``, the `vllm` extra).

Each example goes to ``vllm.LLM.generate`` as a token prompt: the ids the transformers adapter
feeds for it (its prompt as the checkpoint's tokenizer writes it, the image placeholder not yet
expanded, then its gold answer's ids) with the image as ``multi_modal_data``; vLLM expands the
placeholder itself. ``SamplingParams(prompt_logprobs=0, max_tokens=1)`` returns, per prompt
position, log p of the prompt's own token, so the answer's log-probs are those of the last
``len(answer_ids)`` positions. Sending token ids instead of text keeps the answer's tokens exactly
those of the transformers path (no second tokenisation: a BPE merge at the prompt/answer boundary
and a chat template's own ``<bos>`` stay as the adapter has them).

Min-K%++ z (a token's log p standardised by the mean and variance of log p over the whole
vocabulary) needs the full next-token distribution. vLLM returns a position's top-k log-probs;
only ``prompt_logprobs=-1`` returns them all, and then for every prompt position, image tokens
included, as Python objects (about 10^8 per example for a 7B VLM's 150k vocabulary and its ~700
prompt tokens): not a scoring path. So z is not computed, nor approximated from a top-k:
``token_minkpp_z`` holds NaN, which the Min-K%++ consumers refuse by name (mink_tail's
cohort matrix and the order_mink control reject NaN scores); the other columns are complete. The
OpenAI-compatible chat endpoint is no alternative: it returns no prompt log-probs for image
inputs (vllm-project/vllm#16107).

vLLM is imported only in :func:`vllm_engine`; tests pass a stand-in engine factory instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from medexp.benchmarks.base import Example
from medexp.config.schemas import DType
from medexp.config.schemas.model import backend_problem
from medexp.models.hf import PreparedExample, ProcessorPrompts, answer_row, load_error

INSTALL_HINT = "pip install 'medexp[vllm]' on a machine with a CUDA GPU"


@dataclass(frozen=True)
class Engine:
    """What the scorer uses of vLLM: an ``LLM`` and the ``SamplingParams`` class."""

    llm: Any
    sampling_params: Callable[..., Any]


def vllm_engine(model_cfg, location: str) -> Engine:
    """vLLM's offline engine over the checkpoint, in the configured dtype, with prefix caching."""
    try:
        import vllm
    except ImportError as error:
        raise ImportError(f"model={model_cfg.name}: backend=vllm needs vLLM, which is not installed "
                          f"({error}); {INSTALL_HINT}, or set model.backend=transformers") from error
    # Prefix caching pays off for generate() (answering detectors ask each image several times).
    # For scoring it saves nothing today: vLLM recomputes the whole prefill of a request that
    # asks for prompt log-probs, as they are not cached (vLLM's V1 guide, "Prompt Logprobs with
    # Prefix Caching").
    llm = vllm.LLM(model=location, revision=model_cfg.revision, trust_remote_code=bool(model_cfg.trust_remote_code),
                   dtype=DType(model_cfg.dtype).value, enable_prefix_caching=True, seed=0)
    return Engine(llm, vllm.SamplingParams)


class VLLMScorer(ProcessorPrompts):
    """The score tables of :class:`medexp.models.hf.HFScorer`, computed by vLLM.

    The checkpoint's processor (loaded with transformers, no weights) builds the prompts and the
    answer ids exactly as the family's adapter does; vLLM runs the model.
    """

    def __init__(self, model_cfg, location: str, engine_factory: Callable[[Any, str], Engine] = vllm_engine):
        problem = backend_problem(model_cfg, f"model={model_cfg.name}")
        if problem:
            raise ValueError(problem)
        self.cfg = model_cfg
        self.location = location
        self.engine = engine_factory(model_cfg, location)
        from transformers import AutoProcessor

        try:
            self.processor = AutoProcessor.from_pretrained(location, revision=model_cfg.revision,
                                                           trust_remote_code=bool(model_cfg.trust_remote_code))
        except OSError as error:
            raise load_error(model_cfg.name, location, error) from error
        self._init_prompts()

    # ------------------------------------------------------------------ examples
    def score_examples(self, examples: Sequence[Example]) -> pd.DataFrame:
        """One row per example, the columns of ``HFScorer.score_examples``; ``token_minkpp_z`` is NaN."""
        prepared = [self._prepare(example) for example in examples]
        params = self.engine.sampling_params(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        outputs = self.engine.llm.generate([self._request(item) for item in prepared], params, use_tqdm=False)
        rows = []
        for item, output in zip(prepared, outputs, strict=True):
            values = np.asarray(self._answer_logprobs(item, output), dtype=np.float64)
            rows.append(answer_row(item, values, [math.nan] * len(values)))  # z: no full distribution from vLLM
        return pd.DataFrame(rows)

    def _request(self, item: PreparedExample) -> dict[str, Any]:
        """vLLM's TokensPrompt of an example: prompt ids (placeholder unexpanded), answer ids, image."""
        return self._prompt(self._prompt_ids(item.prompt) + item.answer_ids, item.example.image)

    def _prompt_ids(self, prompt: str) -> list[int]:
        # As HFScorer.processor_inputs: a chat template writes every special token itself.
        return self.tokenizer(prompt, add_special_tokens=not self.use_chat)["input_ids"]

    @staticmethod
    def _prompt(token_ids: list[int], image) -> dict[str, Any]:
        from medexp.benchmarks.images import read_image

        request: dict[str, Any] = {"prompt_token_ids": token_ids}
        if image is not None:
            request["multi_modal_data"] = {"image": read_image(image, "RGB")}
        return request

    @staticmethod
    def _answer_logprobs(item: PreparedExample, output) -> list[float]:
        """log p of each answer token: the last ``len(answer_ids)`` prompt positions of the output."""
        ids, n = list(output.prompt_token_ids), len(item.answer_ids)
        if ids[-n:] != item.answer_ids or len(output.prompt_logprobs) != len(ids):
            raise ValueError(
                f"{item.example.example_id}: vLLM's prompt ends in {ids[-n:]}, not the gold answer's ids "
                f"{item.answer_ids} (or its {len(output.prompt_logprobs)} prompt log-probs do not cover its "
                f"{len(ids)} tokens): the engine rewrote the token prompt, its answer cannot be scored"
            )
        return prompt_token_logprobs(output, len(ids) - n)

    # ------------------------------------------------------------------ generation
    def generate(self, examples: Sequence[Example], max_new_tokens: int) -> list[str]:
        """Greedy continuations of each example's prompt, decoded without special tokens."""
        params = self.engine.sampling_params(max_tokens=max_new_tokens, temperature=0.0)
        requests = [self._prompt(self._prompt_ids(self.prompt(example)), example.image) for example in examples]
        outputs = self.engine.llm.generate(requests, params, use_tqdm=False)
        return [self.tokenizer.decode(output.outputs[0].token_ids, skip_special_tokens=True).strip()
                for output in outputs]

    # ------------------------------------------------------------------ raw text
    def score_texts(self, texts: Sequence[str], context_length: int, stride: int, batch_size: int) -> np.ndarray:
        """Total log-likelihood of each text (no image), windowed as ``HFScorer.score_texts``;
        vLLM batches the windows itself, so ``batch_size`` is not used."""
        windows = self._text_windows(texts, context_length, stride)
        params = self.engine.sampling_params(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        outputs = self.engine.llm.generate([{"prompt_token_ids": w.token_ids} for w in windows], params,
                                           use_tqdm=False)
        totals = np.zeros(len(texts), dtype=np.float64)
        for window, output in zip(windows, outputs, strict=True):
            totals[window.text_index] += sum(prompt_token_logprobs(output, max(1, window.first_target)))
        return totals


def prompt_token_logprobs(output, first: int) -> list[float]:
    """log p of each prompt token of a ``RequestOutput`` from position ``first`` (>= 1: position 0
    has no context, its entry is None) to the end, read from its ``prompt_logprobs``."""
    ids = output.prompt_token_ids
    return [output.prompt_logprobs[t][ids[t]].logprob for t in range(first, len(ids))]
