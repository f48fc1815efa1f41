"""Gemma 3 / MedGemma adapter on a tiny Gemma3ForConditionalGeneration."""

from __future__ import annotations

import numpy as np
import pytest

from tests.manual_scoring import rows
from tests.models.conftest import make_scorer
from tests.models.contract import ScorerContract


class TestGemma3(ScorerContract):
    FAMILY = "gemma3"
    MODEL_CLASS = "Gemma3ForConditionalGeneration"
    END_TOKEN = "<end_of_turn>"

    def test_prompt_has_one_bos_and_the_model_turn(self, scorer, examples):
        prompt = scorer.prompt(examples[0][1])
        assert prompt == "<bos><start_of_turn>user\n<start_of_image>Is there a lesion?<end_of_turn>\n<start_of_turn>model\n"
        # The tokenizer adds <bos> by itself; the chat template already wrote one.
        bos = scorer.tokenizer.bos_token_id
        assert scorer.tokenizer("x")["input_ids"][0] == bos
        encoded = scorer._encode([scorer._prepare(examples[0][1])])
        assert encoded["input_ids"][0, 0] == bos and encoded["input_ids"][0, 1] != bos

    def test_token_type_ids_mark_image_tokens_and_reach_the_model(self, scorer, examples, monkeypatch):
        from medexp.models.hf import _append_answers

        items = [scorer._prepare(ex) for ex in examples[0][:2]]
        encoded = scorer._encode(items)
        inputs, answer_mask = _append_answers(encoded, [i.answer_ids for i in items], scorer.pad_id,
                                              scorer.SEQUENCE_KEYS)
        soft = scorer.tokenizer.convert_tokens_to_ids("<image_soft_token>")
        assert inputs["token_type_ids"].shape == inputs["input_ids"].shape
        assert (inputs["token_type_ids"] == 1).equal(inputs["input_ids"] == soft)
        assert not inputs["token_type_ids"][answer_mask].any()
        # Without them image tokens attend causally and the scores change: they must be passed.
        with_types = rows(scorer.score_examples(examples[0][:2]))
        monkeypatch.setattr(type(scorer), "SEQUENCE_KEYS", ())
        monkeypatch.setattr(scorer, "processor_inputs",
                            lambda prompts, images, _orig=scorer.processor_inputs: {
                                k: v for k, v in _orig(prompts, images).items() if k != "token_type_ids"})
        without = rows(scorer.score_examples(examples[0][:2]))
        assert np.max(np.abs(np.subtract(with_types[0]["token_logprobs"], without[0]["token_logprobs"]))) > 1e-3

    def test_float16_is_refused_with_the_allowed_dtypes(self, checkpoint):
        with pytest.raises(ValueError, match=r"dtype float16 .*'gemma3'.*\['float32', 'bfloat16'\]"):
            make_scorer(checkpoint, self.FAMILY, dtype="float16")
