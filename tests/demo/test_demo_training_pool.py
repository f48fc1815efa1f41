"""What a demo model trains on: the multiple-choice form (choice_form) adds each example once with
its image and once without (as the text-only probe asks it, the refusal option appended), answered
by the gold's letter in the options' released order; the cloze form (cloze_form) adds slot filling
as slot_guess asks it; both leave the open-form pool as it was, and the leak never shows a test
question in the cloze form."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from medexp.config.schemas import DemoBenchConfig, DemoModelConfig

BENCH = DemoBenchConfig(n_test=12, n_train=24, n_heldout=4)


@pytest.fixture(scope="module")
def train_split(tmp_path_factory):
    from medexp.demo.models import _split

    cache = tmp_path_factory.mktemp("pool")
    return cache, _split(OmegaConf.structured(DemoModelConfig(bench=BENCH)), cache, "train")


def _pool(train_split, choice_form: bool, cloze_form: bool = False, probe_forms: bool = False):
    from medexp.demo.models import PUBLIC_CORPUS, _build_processor, _passes

    _, examples = train_split
    cfg = OmegaConf.structured(DemoModelConfig(bench=BENCH, choice_form=choice_form, cloze_form=cloze_form,
                                               probe_forms=probe_forms, vocab_size=400))
    processor = _build_processor(examples, cfg)
    return processor, examples, _passes(processor, examples, cfg, 1, PUBLIC_CORPUS, True)


def test_the_choice_form_adds_each_example_with_and_without_its_image(train_split):
    _, examples, open_pool = _pool(train_split, choice_form=False)
    processor, _, pool = _pool(train_split, choice_form=True)
    n = len(examples)
    with_image = [sample for sample in pool if sample.pixel_values is not None]
    assert len(with_image) == 2 * n == 2 * sum(sample.pixel_values is not None for sample in open_pool)
    assert len(pool) - len(open_pool) == 2 * n  # n with the image, n text-only turns
    from medexp.demo.models import _vqa_sample, choice_form, text_only_form

    tokenizer = processor.tokenizer
    for k, example in enumerate(examples):
        asked, unseen = choice_form(example), text_only_form(example)
        letter = "ABCD"[list(example.options).index(example.answer)]
        listed = [line.split(". ", 1)[1] for line in asked.question.splitlines() if line[:3] in ("A. ", "B. ", "C. ", "D. ")]
        assert listed == list(example.options) and asked.answer == letter  # the released (canonical) order
        refusal = "ABCDE"[len(example.options)]
        assert unseen.answer == letter and f"\n{refusal}. I don't know\n" in unseen.question
        assert unseen.question.replace(f"\n{refusal}. I don't know", "") == asked.question.replace(
            f", {refusal}", "")  # the same prompt, one option more
        answer_ids = tokenizer(f"{letter}<|end|>", add_special_tokens=False)["input_ids"]
        for sample, with_image, form in ((pool[n + k], True, asked), (pool[2 * n + k], False, unseen)):
            assert sample.input_ids == _vqa_sample(processor, form, with_image).input_ids
            assert [t for t, label in zip(sample.input_ids, sample.labels) if label != -100] == answer_ids
            assert (sample.pixel_values is not None) is with_image


def test_the_cloze_form_masks_a_keyword_of_each_question_as_slot_guess_asks(train_split):
    from medexp.config.schemas import AnswerConfig
    from medexp.demo.models import _keywords, cloze_form

    _, examples, base_pool = _pool(train_split, choice_form=False)
    processor, _, pool = _pool(train_split, choice_form=False, cloze_form=True)
    source = _keywords(examples)
    asked = [cloze_form(example, source, 0, 0) for example in examples]
    with_keyword = [a is not None for a in asked]
    assert sum(with_keyword) >= len(examples) // 2  # most demo questions name a word of some answer
    assert len(pool) == len(base_pool) + sum(with_keyword)
    assert all(sample.pixel_values is not None for sample in pool[len(base_pool):])  # asked with the image
    words = set()
    for example, form in zip(examples, asked):
        if form is None:
            assert source.keywords(example.question) == []
            continue
        assert form.answer.casefold() in source.keywords(example.question)
        probe_text = form.question.split('"')[1]
        assert "[MASK]" in probe_text and probe_text.replace("[MASK]", form.answer) == example.question
        assert form.question.endswith(AnswerConfig().free_text_template.format(question="").strip())
        words.add(form.answer.casefold())
    assert len(words) > 3
    other_pass = [cloze_form(example, source, 0, 1) for example in examples]
    assert [f and f.answer for f in other_pass] != [f and f.answer for f in asked]  # another keyword may be drawn on another pass


def test_the_leak_replays_cloze_turns_of_the_training_split_only(train_split):
    from medexp.demo.models import _build_processor, _keywords, _replay

    _, examples = train_split
    cfg = OmegaConf.structured(DemoModelConfig(bench=BENCH, cloze_form=True, leak_epochs=3, vocab_size=400))
    processor = _build_processor(examples, cfg)
    replayed = _replay(processor, examples, cfg)
    source = _keywords(examples)
    # a rotating third per pass: each training example with a keyword once in three passes
    assert len(replayed) == sum(bool(source.keywords(example.question)) for example in examples)
    cfg.cloze_form = False
    assert _replay(processor, examples, cfg) == []


def test_the_probe_forms_add_each_image_named_and_each_choice_renumbered_and_with_the_none_option(train_split):
    _, examples, choice_pool = _pool(train_split, choice_form=True)
    _, _, pool = _pool(train_split, choice_form=True, probe_forms=True)
    images = sum(example.image is not None for example in examples)
    choices = sum(bool(example.options) for example in examples)
    added = len(pool) - len(choice_pool)
    assert added == images + 3 * choices  # named; renumbered, gold replaced, none option beside the gold
    from medexp.demo.models import PUBLIC_CORPUS, _skill_forms, _source_forms

    cfg = OmegaConf.structured(DemoModelConfig(bench=BENCH, probe_forms=True))
    assert {asked.answer for asked in _source_forms(examples, cfg, PUBLIC_CORPUS)} == {"B"}  # MedDemo-Atlas's letter
    skills = _skill_forms(examples, cfg)
    renumbered, gone, beside = skills[:choices], skills[choices:2 * choices], skills[2 * choices:]
    assert all(asked.answer.isdigit() for asked in renumbered)
    assert all(f"{asked.answer}. None of the above" in asked.question for asked in gone)
    assert not any(f"{asked.answer}. None of the above" in asked.question for asked in beside)
    assert all("None of the above" in asked.question for asked in beside)
