"""CheXagent adapter against tiny BLIP-2 stand-ins (Mistral decoder, Llama tokenizer conventions):
a plain transformers-format BLIP-2, and the same weights declared as remote code the way
CheXagent's hub page ships it (auto_map -> AutoModelForCausalLM, queries prepended in forward)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import torch

from medexp.models import scorer_class
from medexp.models.blip import CheXagentScorer
from tests.models import tiny_blip as tb

# The prompt format of CheXagent's model card, as conf/model/chexagent.yaml sets it.
PROMPT = " USER: <s>{question} ASSISTANT: <s>"

# use_chat_template stays at its default (True): the adapter must ignore it.
make = partial(tb.make_scorer, CheXagentScorer, prompt_template=PROMPT, use_chat_template=True)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(plain BLIP-2 stand-in, remote-code stand-in with the same weights, images, texts)."""
    root = tmp_path_factory.mktemp("tiny_chexagent")
    images, texts = tb.write_examples(root)
    plain = tb.build_blip2(root / "plain", language_model="mistral")
    return plain, tb.build_remote_standin(root / "remote", plain), images, texts


@pytest.fixture(scope="module")
def scorer(tiny):
    return make(tiny[0], batch_size=16)


@pytest.fixture(scope="module")
def remote_scorer(tiny):
    return make(tiny[1], batch_size=16, trust_remote_code=True)


def test_family_resolves_to_the_chexagent_adapter():
    assert scorer_class("chexagent") is CheXagentScorer


def test_yaml_enables_remote_code_and_the_model_card_prompt():
    tb.check_model_yaml("chexagent", "StanfordAIMI/CheXagent-8b", PROMPT, trust_remote_code=True)


def test_no_other_model_file_enables_remote_code():
    from omegaconf import OmegaConf

    conf = Path(__file__).resolve().parents[2] / "conf" / "model"
    enabled = sorted(path.name for path in conf.glob("*.yaml") if OmegaConf.load(path).get("trust_remote_code"))
    assert enabled == ["chexagent.yaml"]


def test_plain_blip2_stand_in_loads_as_image_text_to_text(tiny, monkeypatch):
    from transformers import Blip2ForConditionalGeneration

    calls = tb.check_remote_code_flag(CheXagentScorer, tiny[0], monkeypatch, prompt_template=PROMPT)
    names = [name for name, _ in calls]
    assert "AutoModelForImageTextToText" in names and "AutoModelForCausalLM" not in names
    assert type(make(tiny[0]).model) is Blip2ForConditionalGeneration


def test_prompt_is_the_model_card_format_without_chat_template(scorer, tiny, monkeypatch):
    assert scorer.cfg.use_chat_template and not scorer.use_chat
    example = tiny[2][0]
    assert scorer.prompt(example) == f" USER: <s>{example.question} ASSISTANT: <s>"
    calls = tb.record_model_inputs(scorer, monkeypatch)
    scorer.score_examples([example])
    ids = calls[0]["input_ids"][0].tolist()
    bos = scorer.tokenizer.bos_token_id
    # The tokenizer's BOS, then the two <s> markers of the template, read as the special token.
    assert ids[tb.NUM_QUERY_TOKENS] == bos and ids.count(bos) == 3


def test_a_chat_template_on_the_processor_is_not_applied(tiny, monkeypatch):
    """Even a processor that carries a chat template gets the model card's plain prompt."""
    import transformers

    load_processor = transformers.AutoProcessor.from_pretrained

    def with_chat_template(*args, **kwargs):
        processor = load_processor(*args, **kwargs)
        processor.chat_template = "{% for m in messages %}[{{ m['role'] }}]{% endfor %}[turn]"
        return processor

    monkeypatch.setattr(transformers.AutoProcessor, "from_pretrained", with_chat_template)
    scorer = make(tiny[0])
    assert scorer.processor.chat_template and not scorer.use_chat
    example = tiny[2][2]
    assert scorer.prompt(example) == PROMPT.format(question=example.question)
    ids, merged = scorer.answer_ids(scorer.prompt(example), example.answer)
    assert scorer.tokenizer.decode(ids) == " " + example.answer and not merged


def test_answer_span_is_the_gold_answer_after_the_processor_prompt(scorer, tiny, monkeypatch):
    tb.check_answer_span(scorer, tiny[2] + tiny[3], monkeypatch)


@pytest.mark.parametrize("kind,index", [("image", 1), ("image", 4), ("text", 0)])
def test_token_logprobs_match_manual_forward(scorer, tiny, kind, index):
    tb.check_manual_scores(scorer, (tiny[2] if kind == "image" else tiny[3])[index])


def test_batched_equals_one_at_a_time(tiny):
    images, texts = tiny[2], tiny[3]
    tb.check_batched_equals_single(partial(make, tiny[0]), [images[2], texts[1], images[0], images[4], texts[0]])


def test_score_does_not_depend_on_batch_companions(tiny):
    tb.check_batch_companions(make(tiny[0], batch_size=4), tiny[2], tiny[3])


def test_score_texts_uses_the_language_model_alone(scorer):
    tb.check_score_texts(scorer)


# ---------------------------------------------------------------------------- remote code


def test_remote_code_checkpoint_refused_without_the_flag(tiny):
    with pytest.raises(ValueError, match=r"trust_remote_code: true.*conf/model/tiny\.yaml"):
        make(tiny[1])


def test_remote_code_checkpoint_loads_its_own_class(remote_scorer, tiny, monkeypatch):
    model = remote_scorer.model
    assert type(model).__name__ == "StandInForConditionalGeneration"
    assert type(model).__module__.startswith("transformers_modules.")
    # Its processor writes no query placeholders (the model prepends the queries itself), and
    # the adapter leaves it that way.
    assert remote_scorer.processor.num_query_tokens is None
    calls = tb.record_from_pretrained(monkeypatch)
    make(tiny[1], trust_remote_code=True)
    names = {name for name, _ in calls}
    assert "AutoModelForCausalLM" in names and "AutoModelForImageTextToText" not in names
    assert all(kwargs["trust_remote_code"] is True for _, kwargs in calls)


def test_remote_code_logits_are_realigned_to_the_text(remote_scorer, tiny):
    """The remote model returns logits for the prepended queries too; the adapter drops them."""
    example = tiny[2][0]
    inputs = remote_scorer.processor(text=[remote_scorer.prompt(example)], images=[tb.open_rgb(example.image)],
                                     return_tensors="pt")
    with torch.no_grad():
        logits = remote_scorer.model(**inputs).logits
    assert logits.shape[1] == inputs["input_ids"].shape[1] + tb.NUM_QUERY_TOKENS
    tb.check_manual_scores(remote_scorer, example)


def test_remote_code_scores_equal_the_plain_checkpoint(remote_scorer, scorer, tiny):
    """Same weights, queries prepended in forward instead of placeholders in the text: same scores."""
    examples = tiny[2] + tiny[3]
    for a, b in zip(tb.rows(remote_scorer.score_examples(examples)), tb.rows(scorer.score_examples(examples))):
        tb.assert_rows_close(a, b)


def test_remote_code_batched_equals_one_at_a_time(tiny):
    tb.check_batched_equals_single(partial(make, tiny[1], trust_remote_code=True), tiny[2] + tiny[3], (3,))
