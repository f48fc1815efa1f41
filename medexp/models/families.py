"""Scorer adapters of the chat-template VLM families.

Each family loads its checkpoints with its own transformers class and refuses a checkpoint of
another architecture. Everything else is the generic path of :class:`HFScorer`: the family's
chat template builds the prompt (image entry first), the processor expands the image
placeholder and returns the family's extra inputs, which pass through to the model unchanged
(Qwen2.5-VL's flattened patches and ``image_grid_thw``, LLaVA-OneVision's anyres tiles and
``image_sizes``, InternVL's crops) or are widened over the appended answer (Gemma 3's
``token_type_ids``, which mark the image tokens that attend to each other both ways). The
gold answer is appended after the prompt, so template end tokens (``<|im_end|>``,
``<end_of_turn>``) are never part of the answer span.
"""

from __future__ import annotations

from types import MappingProxyType

from medexp.models.hf import HFScorer


class Qwen25VLScorer(HFScorer):
    """Qwen2.5-VL (Qwen/Qwen2.5-VL-7B-Instruct)."""

    MODEL_CLASS = "Qwen2_5_VLForConditionalGeneration"
    MODEL_TYPES = ("qwen2_5_vl",)

    def prefix_positions(self, inputs):
        """Multimodal rope: an image's tokens take (time, height, width) positions and the text
        after it continues from the largest position so far plus one, so a continuation starts
        there rather than at the prefix's token count. Computed here, not left to the model,
        which would keep the batch's rope deltas as state between calls."""
        positions, _ = self.model.model.get_rope_index(
            inputs["input_ids"], mm_token_type_ids=inputs["mm_token_type_ids"],
            image_grid_thw=inputs.get("image_grid_thw"), attention_mask=inputs["attention_mask"])
        real = inputs["attention_mask"].bool()[None].expand_as(positions)
        return positions, positions.masked_fill(~real, -1).amax(dim=(0, 2)) + 1


class LlavaOnevisionScorer(HFScorer):
    """LLaVA-OneVision in transformers format (llava-hf/llava-onevision-qwen2-7b-ov-hf)."""

    MODEL_CLASS = "LlavaOnevisionForConditionalGeneration"
    MODEL_TYPES = ("llava_onevision",)


class InternVLScorer(HFScorer):
    """InternVL3 in transformers format (OpenGVLab/InternVL3-8B-hf; the remote-code checkpoints
    without -hf are another architecture and are refused)."""

    MODEL_CLASS = "InternVLForConditionalGeneration"
    MODEL_TYPES = ("internvl",)


class Gemma3Scorer(HFScorer):
    """Gemma 3 and MedGemma (google/medgemma-4b-it, a gated repository)."""

    MODEL_CLASS = "Gemma3ForConditionalGeneration"
    MODEL_TYPES = ("gemma3",)
    UNSUPPORTED_DTYPES = MappingProxyType(
        {"float16": "Gemma 3 activations overflow the float16 range and turn into inf/NaN"}
    )
