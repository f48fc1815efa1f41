"""Qwen2.5-VL adapter on a tiny Qwen2_5_VLForConditionalGeneration: dynamic-resolution patches."""

from __future__ import annotations

import torch

from tests.models.contract import ScorerContract


class TestQwen25VL(ScorerContract):
    FAMILY = "qwen2_5_vl"
    MODEL_CLASS = "Qwen2_5_VLForConditionalGeneration"
    END_TOKEN = "<|im_end|>"

    def test_prompt_follows_the_chat_template(self, scorer, examples):
        prompt = scorer.prompt(examples[0][0])
        assert prompt.startswith("<|im_start|>system\n")
        assert "<|vision_start|><|image_pad|><|vision_end|>What modality is this scan?<|im_end|>\n" in prompt
        assert prompt.endswith("<|im_start|>assistant\n")

    def test_each_image_gets_its_own_grid_of_flattened_patches(self, scorer, examples):
        images = examples[0]
        encoded = scorer._encode([scorer._prepare(ex) for ex in images])
        grids = encoded["image_grid_thw"]
        # 4-pixel patches, resized to multiples of 8 px: (t, h/4, w/4) per image (width x height given).
        assert grids.tolist() == [[1, 8, 8], [1, 8, 12], [1, 14, 8], [1, 10, 10], [1, 8, 16]]
        assert encoded["pixel_values"].dim() == 2  # all patches of the batch, flattened
        assert encoded["pixel_values"].shape[0] == int(grids.prod(dim=1).sum())
        pad = scorer.tokenizer.convert_tokens_to_ids("<|image_pad|>")
        counts = (encoded["input_ids"] == pad).sum(dim=1)
        assert torch.equal(counts, grids.prod(dim=1) // 4)  # 2 x 2 patches merge into one token
