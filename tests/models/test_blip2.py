"""BLIP-2 adapter on a tiny random-weight Blip2ForConditionalGeneration (OPT decoder) loaded from disk."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch

from medexp.models import scorer_class
from medexp.models.blip import Blip2Scorer
from tests.models import tiny_blip as tb

make = partial(tb.make_scorer, Blip2Scorer)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(right-padding checkpoint, left-padding checkpoint with the same weights, images, texts)."""
    root = tmp_path_factory.mktemp("tiny_blip2")
    images, texts = tb.write_examples(root)
    return tb.build_blip2(root / "right"), tb.build_blip2(root / "left", padding_side="left"), images, texts


@pytest.fixture(scope="module")
def scorer(tiny):
    return make(tiny[0], batch_size=16)


def test_family_resolves_to_the_blip2_adapter():
    assert scorer_class("blip2") is Blip2Scorer


def test_yaml_selects_the_family_and_its_prompt():
    tb.check_model_yaml("blip2", "Salesforce/blip2-opt-2.7b", "Question: {question} Answer:")


def test_another_family_refuses_the_checkpoint(tiny):
    from medexp.models.blip import InstructBlipScorer

    tb.check_refuses_checkpoint(InstructBlipScorer, tiny[0], "blip-2", "instructblip")


def test_loads_the_real_class_through_from_pretrained(scorer):
    from transformers import Blip2ForConditionalGeneration, Blip2Processor

    assert type(scorer.model) is Blip2ForConditionalGeneration
    assert type(scorer.processor) is Blip2Processor
    assert scorer.processor.num_query_tokens == tb.NUM_QUERY_TOKENS
    assert scorer.use_chat is False


def test_answer_span_is_the_gold_answer_after_the_processor_prompt(scorer, tiny, monkeypatch):
    tb.check_answer_span(scorer, tiny[2] + tiny[3], monkeypatch)


def test_query_placeholders_lead_the_image_rows_only(scorer, tiny, monkeypatch):
    calls = tb.record_model_inputs(scorer, monkeypatch)
    scorer.score_examples([tiny[2][0], tiny[3][0]])
    image_token = scorer.model.config.image_token_id
    image_call, text_call = calls
    assert "pixel_values" in image_call and "pixel_values" not in text_call
    first = image_call["input_ids"][0].tolist()
    assert first[: tb.NUM_QUERY_TOKENS] == [image_token] * tb.NUM_QUERY_TOKENS
    assert first[tb.NUM_QUERY_TOKENS] == scorer.tokenizer.bos_token_id
    assert image_token not in first[tb.NUM_QUERY_TOKENS :]
    assert image_token not in text_call["input_ids"].tolist()[0]


@pytest.mark.parametrize("kind,index", [("image", 0), ("image", 2), ("text", 1)])
def test_token_logprobs_match_manual_forward(scorer, tiny, kind, index):
    tb.check_manual_scores(scorer, (tiny[2] if kind == "image" else tiny[3])[index])


def test_batched_equals_one_at_a_time(tiny):
    images, texts = tiny[2], tiny[3]
    mixed = [texts[0], images[0], images[2], texts[1], images[1], images[4], images[3]]
    tb.check_batched_equals_single(partial(make, tiny[0]), mixed)


@pytest.mark.parametrize("side", ["right", "left"])
def test_score_does_not_depend_on_batch_companions(tiny, side):
    model_dir = tiny[0] if side == "right" else tiny[1]
    assert make(model_dir).tokenizer.padding_side == side
    tb.check_batch_companions(make(model_dir, batch_size=4), tiny[2], tiny[3])


def test_processor_padding_side_does_not_change_scores(tiny):
    right = tb.rows(make(tiny[0], batch_size=8).score_examples(tiny[2] + tiny[3]))
    left = tb.rows(make(tiny[1], batch_size=8).score_examples(tiny[2] + tiny[3]))
    for a, b in zip(left, right):
        tb.assert_rows_close(a, b)


def test_image_changes_the_score(scorer, tiny):
    tb.check_image_matters(scorer, tiny[2])


def test_processor_without_query_count_takes_it_from_the_model(tiny, tmp_path):
    """A processor saved without num_query_tokens would write no placeholders, and the model
    would find no slot for its queries; the adapter fills the count in and scores the same."""
    old_style = tb.build_blip2(tmp_path / "old", num_query_tokens=None)
    scorer = make(old_style, batch_size=8)
    assert scorer.processor.num_query_tokens == tb.NUM_QUERY_TOKENS
    reference = tb.rows(make(tiny[0], batch_size=8).score_examples(tiny[2]))
    for a, b in zip(tb.rows(scorer.score_examples(tiny[2])), reference):
        tb.assert_rows_close(a, b)


def test_score_texts_uses_the_language_model_alone(scorer):
    tb.check_score_texts(scorer)


def test_bfloat16_scores_close_to_float32(tiny, scorer, monkeypatch):
    """The GPU setting (bf16 weights) runs, hands the model pixels in its own dtype (the
    processor makes float32 ones) and stays close to float32 scores."""
    bf16 = make(tiny[0], batch_size=8, dtype="bfloat16")
    assert bf16.model.dtype == torch.bfloat16
    calls = tb.record_model_inputs(bf16, monkeypatch)
    low = tb.rows(bf16.score_examples(tiny[2] + tiny[3]))
    assert calls[0]["pixel_values"].dtype == torch.bfloat16
    high = tb.rows(scorer.score_examples(tiny[2] + tiny[3]))
    for a, b in zip(low, high):
        assert a["n_answer_tokens"] == b["n_answer_tokens"]
        np.testing.assert_allclose(a["token_logprobs"], b["token_logprobs"], rtol=0, atol=0.25)


def test_trust_remote_code_only_when_the_config_enables_it(tiny, monkeypatch):
    calls = tb.check_remote_code_flag(Blip2Scorer, tiny[0], monkeypatch)
    assert "AutoModelForImageTextToText" in {name for name, _ in calls}
