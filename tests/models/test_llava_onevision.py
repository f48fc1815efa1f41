"""LLaVA-OneVision adapter on a tiny LlavaOnevisionForConditionalGeneration: anyres tiles."""

from __future__ import annotations

from tests.models.contract import ScorerContract


class TestLlavaOnevision(ScorerContract):
    FAMILY = "llava_onevision"
    MODEL_CLASS = "LlavaOnevisionForConditionalGeneration"
    END_TOKEN = "<|im_end|>"

    def test_prompt_puts_the_image_before_the_question(self, scorer, examples):
        prompt = scorer.prompt(examples[0][1])
        assert prompt == "<|im_start|>user\n<image>\nIs there a lesion?<|im_end|>\n<|im_start|>assistant\n"

    def test_anyres_tiles_follow_each_image_size(self, scorer, examples):
        images = examples[0]
        encoded = scorer._encode([scorer._prepare(ex) for ex in images])
        assert encoded["image_sizes"].tolist() == [[32, 32], [32, 48], [56, 32], [40, 40], [32, 64]]  # (h, w)
        assert encoded["pixel_values"].dim() == 5  # (image, tile, channel, height, width), tiles padded
        image_id = scorer.tokenizer.convert_tokens_to_ids("<image>")
        counts = (encoded["input_ids"] == image_id).sum(dim=1).tolist()
        assert counts[1] != counts[0] and counts[4] != counts[0]  # the aspect ratio changes the token count
