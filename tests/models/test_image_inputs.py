"""Scoring runs the image processor once per distinct image (by content) on the shared-prefix
path, and on the plain path while an image's questions are together, reuses its output everywhere
the image is asked about, counts it (``images_processed``), keeps no more than a batch's images at
a time, and gives the scores of each image processed afresh; counted on the real
processor of each family's tiny checkpoint, the model never stubbed."""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
import torch

from medexp.benchmarks.base import Example
from medexp.kernel.hashing import file_sha256
from medexp.models.image_inputs import ImageInputs, combine
from tests.manual_scoring import assert_rows_close, rows
from tests.models.conftest import make_scorer
from tests.models.test_shared_prefix import ATOL, shared_examples  # noqa: F401 (a fixture)
from tests.models.tiny import FAMILIES


class CountingImageProcessor:
    """The real image processor, its calls counted and the content of every image it ran on."""

    def __init__(self, real):
        self.real, self.calls, self.images = real, 0, Counter()

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __call__(self, images, *args, **kwargs):
        from transformers.image_utils import make_flat_list_of_images

        self.calls += 1
        self.images.update(hashlib.sha256(image.tobytes()).hexdigest() for image in make_flat_list_of_images(images))
        return self.real(images, *args, **kwargs)


def counted(scorer) -> CountingImageProcessor:
    counter = CountingImageProcessor(scorer.processor.image_processor)
    scorer.processor.image_processor = counter
    return counter


@pytest.fixture(scope="module")
def with_a_copy(shared_examples, tmp_path_factory):  # noqa: F811
    """The shared examples plus two questions on a copy of one of their images under another name:
    the same content, so the same image."""
    image = next(ex.image for ex in shared_examples if ex.image is not None)
    copy = tmp_path_factory.mktemp("copy") / "another-name.png"
    shutil.copyfile(image, copy)
    extra = [Example(f"tiny::copy::{i}", 0, copy, question, answer)
             for i, (question, answer) in enumerate([("Is this the same scan?", "yes"), ("What is shown?", "a scan")])]
    return [replace(ex, position=position) for position, ex in enumerate([*shared_examples, *extra])]


def distinct_images(examples) -> int:
    return len({file_sha256(ex.image) for ex in examples if ex.image is not None})


@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("settings", [{"batch_size": 3}, {"batch_size": 16, "token_budget": 120}],
                         ids=["batch_size", "token_budget"])
def test_each_distinct_image_is_processed_once(tiny_checkpoint, with_a_copy, name, settings):
    directory, family = tiny_checkpoint(name), FAMILIES[name].family
    plain = make_scorer(directory, family, shared_prefix=False, **settings)
    shared = make_scorer(directory, family, **settings)
    plain_calls, shared_calls = counted(plain), counted(shared)
    expected, got = rows(plain.score_examples(with_a_copy)), rows(shared.score_examples(with_a_copy))
    for a, b in zip(got, expected):
        assert_rows_close(a, b, atol=ATOL)
    n_images = distinct_images(with_a_copy)
    # Every distinct image exactly once (the copy under another name is the same image) ...
    assert set(shared_calls.images.values()) == {1} and len(shared_calls.images) == n_images
    assert shared_calls.calls == n_images
    assert shared.token_counts.images_processed == n_images
    # ... and the plain path counts what it processed: fewer than an image per example asked
    # (twice per example with a token budget, length then inputs, were each image processed afresh).
    asked = sum(ex.image is not None for ex in with_a_copy)
    assert plain.token_counts.images_processed == sum(plain_calls.images.values())
    assert plain.token_counts.images_processed < asked


@pytest.mark.parametrize("name", ["qwen2_5_vl", "llava"])
@pytest.mark.parametrize("settings", [{"batch_size": 3}, {"batch_size": 16, "token_budget": 120}],
                         ids=["batch_size", "token_budget"])
def test_the_plain_path_processes_each_image_once_when_its_questions_are_together(tiny_checkpoint, with_a_copy,
                                                                                  name, settings):
    """Scoring whole, with each image's questions listed together (as benchmarks list them) and
    text-only questions last, every distinct image is processed once, over batch boundaries too;
    the scores are those of each image processed afresh (a scorer outside a scoring call)."""
    directory, family = tiny_checkpoint(name), FAMILIES[name].family
    grouped = sorted(with_a_copy, key=lambda ex: (ex.image is None, "" if ex.image is None else file_sha256(ex.image)))
    grouped = [replace(ex, position=position) for position, ex in enumerate(grouped)]
    plain = make_scorer(directory, family, shared_prefix=False, **settings)
    calls = counted(plain)
    table = plain.score_examples(grouped)
    assert plain.token_counts.images_processed == distinct_images(grouped) == len(calls.images)
    assert set(calls.images.values()) == {1}
    fresh = make_scorer(directory, family, shared_prefix=False, batch_size=1)
    for example, row in zip(grouped, rows(table)):
        (alone,) = fresh._score_group([fresh._prepare(example)])
        assert_rows_close(row, alone, atol=ATOL)


def test_images_processed_adds_up_over_calls_and_is_not_shared_state(tiny_checkpoint, with_a_copy):
    """Each scoring call processes its images afresh (nothing is kept between calls) and adds
    them to the scorer's count; the processor is left as it was."""
    scorer = make_scorer(tiny_checkpoint("qwen2_5_vl"), "qwen2_5_vl", batch_size=3)
    real = scorer.processor.image_processor
    scorer.score_examples(with_a_copy)
    scorer.score_examples(with_a_copy[:5])
    assert scorer.token_counts.images_processed == distinct_images(with_a_copy) + distinct_images(with_a_copy[:5])
    assert scorer.processor.image_processor is real and scorer._images is None


def test_no_more_than_a_batch_of_images_is_kept(tiny_checkpoint, tiny_examples, monkeypatch):
    """Five images asked three times each, prefixes two to a batch: at most the images of one
    batch and of the image whose prefixes are being found are kept at once."""
    images, _ = tiny_examples
    asked = [Example(f"k::{i}.{q}", 0, ex.image, question, "yes")
             for i, ex in enumerate(images)
             for q, question in enumerate(["Is it normal?", "Is there a lesion?", "Is it a CT?"])]
    asked = [replace(ex, position=position) for position, ex in enumerate(asked)]
    scorer = make_scorer(tiny_checkpoint("llava"), "generic", batch_size=2)
    kept: list[int] = []
    serving = ImageInputs.serving

    def watched(self, processor, keys):
        kept.append(len(self.entries))
        return serving(self, processor, keys)

    monkeypatch.setattr(ImageInputs, "serving", watched)
    scorer.score_examples(asked)
    assert scorer.token_counts.images_processed == len(images)
    assert 0 < max(kept) <= 3


@pytest.mark.parametrize("name", list(FAMILIES))
def test_combined_outputs_equal_the_image_processors_own_batch(tiny_checkpoint, tiny_examples, name):
    """The outputs served from kept images, one image at a time, equal what the image processor
    makes of the same images in one call (LLaVA-OneVision's tiles padded as it pads them)."""
    from medexp.benchmarks.images import read_image

    scorer = make_scorer(tiny_checkpoint(name), FAMILIES[name].family)
    images, _ = tiny_examples
    group = [scorer._prepare(ex) for ex in (images[0], images[2], images[0], images[4])]
    direct = scorer.processor_inputs([item.prompt for item in group],
                                     [read_image(item.example.image, "RGB") for item in group])
    scorer._images = ImageInputs()
    try:
        served = scorer._encode(group)
        assert scorer._images.processed == 3
    finally:
        scorer._images = None
    assert direct.keys() == served.keys()
    for key in direct:
        a, b = direct[key], served[key]
        if torch.is_tensor(a):
            assert a.shape == b.shape and torch.equal(a, b), key
        else:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_combine_pads_and_joins():
    a, b = torch.ones(1, 2, 3), torch.ones(1, 4, 3)
    assert torch.equal(combine([a, b]), torch.cat([torch.cat([a, torch.zeros(1, 2, 3)], dim=1), b]))
    assert combine([[1], [2, 3]]) == [1, 2, 3]
    assert np.array_equal(combine([np.zeros((2, 2)), np.ones((1, 2))]), np.array([[0, 0], [0, 0], [1, 1]]))
    with pytest.raises(TypeError):
        combine(["pixels"])
