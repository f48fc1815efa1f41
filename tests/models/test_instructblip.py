"""InstructBLIP adapter on a tiny random-weight InstructBlipForConditionalGeneration (Llama decoder,
WordPiece Q-Former tokenizer) loaded from disk."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from medexp.models import scorer_class
from medexp.models.blip import InstructBlipScorer
from tests.models import tiny_blip as tb

PROMPT = "Question: {question} Short answer:"

make = partial(tb.make_scorer, InstructBlipScorer, prompt_template=PROMPT)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(right-padding checkpoint, all-left-padding checkpoint with the same weights, images, texts)."""
    root = tmp_path_factory.mktemp("tiny_instructblip")
    images, texts = tb.write_examples(root)
    left = tb.build_instructblip(root / "left", padding_side="left", qformer_padding_side="left")
    return tb.build_instructblip(root / "right"), left, images, texts


@pytest.fixture(scope="module")
def scorer(tiny):
    return make(tiny[0], batch_size=16)


def test_family_resolves_to_the_instructblip_adapter():
    assert scorer_class("instructblip") is InstructBlipScorer


def test_yaml_selects_the_family_and_its_prompt():
    tb.check_model_yaml("instructblip", "Salesforce/instructblip-vicuna-7b", PROMPT)


def test_another_family_refuses_the_checkpoint(tiny):
    from medexp.models.blip import Blip2Scorer

    tb.check_refuses_checkpoint(Blip2Scorer, tiny[0], "instructblip", "blip-2")


def test_loads_the_real_classes_through_from_pretrained(scorer):
    from transformers import InstructBlipForConditionalGeneration, InstructBlipProcessor

    assert type(scorer.model) is InstructBlipForConditionalGeneration
    assert type(scorer.processor) is InstructBlipProcessor
    assert scorer.processor.qformer_tokenizer.cls_token == "[CLS]"


def test_answer_span_is_the_gold_answer_after_the_processor_prompt(scorer, tiny, monkeypatch):
    tb.check_answer_span(scorer, tiny[2] + tiny[3], monkeypatch)


def test_qformer_inputs_pass_through_unwidened(tiny, monkeypatch):
    """The Q-Former reads the instruction only: its ids reach the model exactly as the processor
    builds them (right-padded), not widened over the appended answer like input_ids."""
    scorer = make(tiny[1], batch_size=8)
    calls = tb.record_model_inputs(scorer, monkeypatch)
    batch = tiny[2][:4]
    scorer.score_examples(batch)
    (sent,) = calls
    prompts = [scorer.prompt(ex) for ex in batch]
    expected = scorer.processor.qformer_tokenizer(prompts, padding=True, padding_side="right", return_tensors="pt")
    assert torch.equal(sent["qformer_input_ids"], expected["input_ids"])
    assert torch.equal(sent["qformer_attention_mask"], expected["attention_mask"])
    assert sent["qformer_input_ids"].shape[1] < sent["input_ids"].shape[1]
    # The processor's own default would have left-padded them: the adapter overrides it.
    default = scorer.processor(text=prompts, padding=True, return_tensors="pt")
    assert not torch.equal(default["qformer_input_ids"], expected["input_ids"])


@pytest.mark.parametrize("kind,index", [("image", 0), ("image", 2), ("text", 1)])
def test_token_logprobs_match_manual_forward(scorer, tiny, kind, index):
    tb.check_manual_scores(scorer, (tiny[2] if kind == "image" else tiny[3])[index])


def test_batched_equals_one_at_a_time(tiny):
    images, texts = tiny[2], tiny[3]
    mixed = [images[3], texts[0], images[0], images[2], texts[1], images[1], images[4]]
    tb.check_batched_equals_single(partial(make, tiny[0]), mixed)


@pytest.mark.parametrize("which", ["right", "left"])
def test_score_does_not_depend_on_batch_companions(tiny, which):
    """Holds with Q-Former instructions of different lengths, whatever side the processor pads."""
    model_dir = tiny[0] if which == "right" else tiny[1]
    tb.check_batch_companions(make(model_dir, batch_size=4), tiny[2], tiny[3])


def test_left_padded_qformer_input_would_change_the_score(scorer, tiny):
    """Why the adapter pads the Q-Former input on the right: BERT positions count from the left
    edge, so left padding (the processor's default here) moves a short instruction when a long
    one shares its batch."""
    x, long = tiny[2][0], tiny[2][3]
    processor = make(tiny[1]).processor
    prompts = [scorer.prompt(x), scorer.prompt(long)]
    images = [tb.open_rgb(x.image), tb.open_rgb(long.image)]
    right = processor(text=prompts, images=images, padding=True, padding_side="right", return_tensors="pt")
    default = processor(text=prompts, padding=True, return_tensors="pt")
    left = {**right, "qformer_input_ids": default["qformer_input_ids"],
            "qformer_attention_mask": default["qformer_attention_mask"]}
    assert not torch.equal(left["qformer_input_ids"], right["qformer_input_ids"])
    with torch.no_grad():
        alone = scorer.model(**processor(text=prompts[:1], images=images[:1], return_tensors="pt")).logits[0]
        shifted = scorer.model(**left).logits[0, : alone.shape[0]]
        kept = scorer.model(**right).logits[0, : alone.shape[0]]
    # A batch of two runs other float32 kernels than one example alone: kept and alone agree to
    # float rounding (seen up to ~1e-5 in a full suite run), the left-padded input is off by far more.
    assert torch.allclose(kept, alone, atol=1e-4)
    assert (shifted - alone).abs().max() > 1e-2


def test_image_changes_the_score(scorer, tiny):
    tb.check_image_matters(scorer, tiny[2])


def test_score_texts_uses_the_language_model_alone(scorer):
    tb.check_score_texts(scorer)


def test_trust_remote_code_only_when_the_config_enables_it(tiny, monkeypatch):
    tb.check_remote_code_flag(InstructBlipScorer, tiny[0], monkeypatch, prompt_template=PROMPT)
