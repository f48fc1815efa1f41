"""InternVL (transformers format) adapter on a tiny InternVLForConditionalGeneration."""

from __future__ import annotations

from tests.models.contract import ScorerContract


class TestInternVL(ScorerContract):
    FAMILY = "internvl"
    MODEL_CLASS = "InternVLForConditionalGeneration"
    END_TOKEN = "<|im_end|>"

    def test_processor_expands_the_image_into_tiles_and_pads_left(self, scorer, examples):
        short, long = examples[0][0], examples[0][4]
        encoded = scorer._encode([scorer._prepare(ex) for ex in (short, long)])
        context = scorer.tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>")
        start = scorer.tokenizer.convert_tokens_to_ids("<img>")
        counts = (encoded["input_ids"] == context).sum(dim=1).tolist()
        # 4 tokens per 16 px tile; a 32 x 32 image is 4 tiles + a thumbnail, a 64 x 32 one 2 tiles + a thumbnail.
        assert counts == [20, 12]
        assert (encoded["input_ids"] == start).sum(dim=1).tolist() == [1, 1]
        assert encoded["pixel_values"].shape[0] == sum(counts) // 4
        # InternVL's processor pads on the left by default; the adapter re-packs rows to the right.
        assert encoded["attention_mask"][1, 0] == 0
