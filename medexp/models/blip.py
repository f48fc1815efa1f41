"""Scorer adapters for the Q-Former families: BLIP-2, InstructBLIP and CheXagent.

These checkpoints put the image in front of the prompt as a fixed number of Q-Former query
embeddings and take a plain prompt template (no chat template). In transformers' own classes
the processor writes one ``<image>`` placeholder per query into ``input_ids`` and the model
swaps the query outputs in; older (and remote-code) BLIP-2 descendants prepend the queries
inside ``forward`` instead, so their logits are longer than ``input_ids``. Both layouts are
handled here, and so are examples without an image, which only the language model can score.
"""

from __future__ import annotations

import logging
from typing import Any

from medexp.benchmarks.base import Example
from medexp.models.hf import HFScorer

log = logging.getLogger(__name__)


class QFormerScorer(HFScorer):
    """Shared behaviour of BLIP-2-style checkpoints (the ``blip2`` family uses it as is)."""

    SHARED_PREFIX_UNSUPPORTED = (
        "the image enters as Q-Former query outputs: InstructBLIP's and CheXagent's queries read the "
        "instruction, so no two questions share an image prefix, and remote-code BLIP-2 descendants "
        "prepend the queries inside forward, outside the input ids a prefix is cut from"
    )

    # The prompt template is the whole prompt; a chat template, if a processor carries one, is not
    # how these models were trained to answer.
    CHAT_TEMPLATE = False

    def __init__(self, model_cfg, location: str, weights: bool = True):
        super().__init__(model_cfg, location, weights)
        self._complete_query_placeholders()

    def model_config(self):
        """The checkpoint's config: the loaded model's, or read from its files without weights."""
        if self.model is not None:
            return self.model.config
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(self.location, revision=self.cfg.revision,
                                          trust_remote_code=bool(self.cfg.trust_remote_code))

    def _complete_query_placeholders(self) -> None:
        """transformers' BLIP classes need one placeholder per query token in ``input_ids``; a
        processor saved without ``num_query_tokens`` would write none, so take it from the model."""
        config = self.model_config()
        native = type(config).__module__.startswith("transformers.")
        if native and hasattr(self.processor, "num_query_tokens") and self.processor.num_query_tokens is None:
            self.processor.num_query_tokens = config.num_query_tokens
            log.info("model=%s: processor has no num_query_tokens; using the model's %d",
                     self.cfg.name, self.processor.num_query_tokens)

    def prompt(self, example: Example) -> str:
        # No image placeholder here: the processor inserts the query placeholders itself.
        return self.cfg.prompt_template.format(question=example.question)

    def processor_inputs(self, prompts: list[str], images: list | None):
        # Right padding for every tokenizer the processor runs: the Q-Former (BERT) numbers
        # positions from the left edge, so a left-padded instruction would move with the
        # length of its batch companions.
        kwargs: dict[str, Any] = {"text": prompts, "return_tensors": "pt", "padding": True, "padding_side": "right"}
        if images is not None:
            kwargs["images"] = images
        encoded = self.processor(**kwargs)
        if "pixel_values" in encoded and self.model is not None:
            # Remote-code vision towers do not all cast their input to their own dtype (bf16 on GPU).
            encoded["pixel_values"] = encoded["pixel_values"].to(self.model.dtype)
        return encoded

    def example_logits(self, inputs: dict[str, Any]):
        """Logits aligned with ``input_ids``: the language model alone for text-only rows, and
        without the positions of query embeddings that a model prepended inside ``forward``."""
        if "pixel_values" not in inputs:
            return self.text_logits(inputs["input_ids"], inputs["attention_mask"])
        logits = self.model(**inputs).logits
        return logits[:, logits.shape[1] - inputs["input_ids"].shape[1] :]

    def answer_logits(self, inputs: dict[str, Any], answer_mask):
        # transformers' BLIP classes take no logits_to_keep: every position is projected.
        from medexp.scoring.teacher_forcing import answer_logit_mask

        return self.example_logits(inputs)[answer_logit_mask(answer_mask)]

    def text_logits(self, input_ids, attention_mask):
        """The wrapped language model (OPT, Vicuna, Mistral ...) on text alone: the full model
        requires pixel values."""
        return self.model.language_model(input_ids=input_ids, attention_mask=attention_mask).logits


class Blip2Scorer(QFormerScorer):
    """BLIP-2 (e.g. Salesforce/blip2-opt-2.7b): prompt template ``Question: {question} Answer:``."""

    MODEL_TYPES = ("blip-2",)


class InstructBlipScorer(QFormerScorer):
    """InstructBLIP (e.g. Salesforce/instructblip-vicuna-7b).

    Its processor also tokenises the prompt for the Q-Former (``qformer_input_ids`` and
    ``qformer_attention_mask``); those are not aligned with ``input_ids`` and pass to the model
    as the processor built them, never widened over the appended answer.
    """

    MODEL_TYPES = ("instructblip",)


class CheXagentScorer(QFormerScorer):
    """CheXagent (StanfordAIMI/CheXagent-8b), a BLIP-2-like model shipped as remote code.

    A checkpoint whose config maps ``AutoModelForCausalLM`` to its own code (CheXagent's hub
    layout) is loaded through that class, which needs ``trust_remote_code: true`` in the model
    YAML; a checkpoint in transformers' own format (a BLIP-2 port) loads as image-text-to-text.
    """

    def load(self, location: str, dtype, common: dict[str, Any]):
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, AutoProcessor

        try:
            config = AutoConfig.from_pretrained(location, **common)
            remote = "AutoModelForCausalLM" in (getattr(config, "auto_map", None) or {})
            model_class = AutoModelForCausalLM if remote else AutoModelForImageTextToText
            processor = AutoProcessor.from_pretrained(location, **common)
            model = model_class.from_pretrained(location, config=config, dtype=dtype, device_map=self.device_map,
                                                **common)
        except ValueError as error:
            if "trust_remote_code" not in str(error):
                raise
            raise ValueError(
                f"model={self.cfg.name}: {location!r} ships its own model code; review it, then set "
                f"`trust_remote_code: true` in conf/model/{self.cfg.name}.yaml to run it"
            ) from error
        return processor, model
