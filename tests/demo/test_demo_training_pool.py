"""What a demo model trains on: the multiple-choice form (choice_form) adds each example once with
its image and once without, answered by the gold's letter in the options' released order, and
leaves the open-form pool as it was."""

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


def _pool(train_split, choice_form: bool):
    from medexp.demo.models import _build_processor, _passes

    _, examples = train_split
    cfg = OmegaConf.structured(DemoModelConfig(bench=BENCH, choice_form=choice_form, vocab_size=400))
    processor = _build_processor(examples, cfg)
    return processor, examples, _passes(processor, examples, cfg, epochs=1)


def test_the_choice_form_adds_each_example_with_and_without_its_image(train_split):
    _, examples, open_pool = _pool(train_split, choice_form=False)
    processor, _, pool = _pool(train_split, choice_form=True)
    n = len(examples)
    with_image = [sample for sample in pool if sample.pixel_values is not None]
    assert len(with_image) == 2 * n == 2 * sum(sample.pixel_values is not None for sample in open_pool)
    assert len(pool) - len(open_pool) == 2 * n  # n with the image, n text-only turns
    from medexp.demo.models import _vqa_sample, choice_form

    tokenizer = processor.tokenizer
    for k, example in enumerate(examples):
        asked = choice_form(example)
        letter = "ABCD"[list(example.options).index(example.answer)]
        listed = [line.split(". ", 1)[1] for line in asked.question.splitlines() if line[:3] in ("A. ", "B. ", "C. ", "D. ")]
        assert listed == list(example.options) and asked.answer == letter  # the released (canonical) order
        answer_ids = tokenizer(f"{letter}<|end|>", add_special_tokens=False)["input_ids"]
        for sample, with_image in ((pool[n + k], True), (pool[2 * n + k], False)):
            assert sample.input_ids == _vqa_sample(processor, asked, with_image).input_ids
            assert [t for t, label in zip(sample.input_ids, sample.labels) if label != -100] == answer_ids
            assert (sample.pixel_values is not None) is with_image
