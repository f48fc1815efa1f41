"""The train / canary / test partition: fractions, stratification, seeding, order independence."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from omegaconf import OmegaConf

from medexp.benchmarks.base import Example
from medexp.config.schemas import PartitionConfig
from medexp.train.partition import partition_examples

SHARES = {"common": 600, "middle": 300, "rare": 100}


def _examples(shares=SHARES) -> list[Example]:
    labels = [label for label, count in shares.items() for _ in range(count)]
    order = np.random.default_rng(0).permutation(len(labels))
    return [Example(f"set::all::{i:04d}", position, None, "", labels[i]) for position, i in enumerate(order)]


def _cfg(**values):
    return OmegaConf.structured(PartitionConfig(**values))


def test_fractions_and_stratification():
    examples = _examples()
    label = {ex.example_id: ex.answer for ex in examples}
    part = partition_examples(examples, _cfg())
    assert (len(part.train), len(part.canary), len(part.test)) == (700, 150, 150)
    assert not set(part.train) & set(part.canary) and not set(part.canary) & set(part.test)
    assert set(part.train) | set(part.canary) | set(part.test) == set(label)
    for ids in (part.train, part.canary, part.test):
        counts = Counter(label[i] for i in ids)
        for cls, total in SHARES.items():
            assert counts[cls] / len(ids) == pytest.approx(total / 1000, abs=0.01)


def test_seeded_and_independent_of_the_input_order():
    examples = _examples()
    first = partition_examples(examples, _cfg(seed=3))
    assert partition_examples(list(reversed(examples)), _cfg(seed=3)) == first
    assert partition_examples(examples, _cfg(seed=4)).canary != first.canary


def test_unstratified_partition_and_empty_parts():
    examples = _examples()
    part = partition_examples(examples, _cfg(stratify=False))
    assert (len(part.train), len(part.canary), len(part.test)) == (700, 150, 150)
    only_test = partition_examples(examples, _cfg(train=0.9, canary=0.0, test=0.1))
    assert (len(only_test.train), len(only_test.canary), len(only_test.test)) == (900, 0, 100)
    everything = partition_examples(examples, _cfg(train=1.0, canary=0.0, test=0.0))
    assert len(everything.train) == 1000 and not everything.canary and not everything.test


@pytest.mark.parametrize("values,message", [
    ({"train": 0.7, "canary": 0.2, "test": 0.2}, "sum to 1"),
    ({"train": 0.0, "canary": 0.5, "test": 0.5}, "partition.train"),
    ({"train": 1.1, "canary": -0.1, "test": 0.0}, ">= 0"),
])
def test_bad_fractions_are_refused(values, message):
    with pytest.raises(ValueError, match=message):
        partition_examples(_examples(), _cfg(**values))


def test_a_class_too_small_to_stratify_is_named():
    with pytest.raises(ValueError, match=r"Class counts: .*'lonely': 1.*stratify=false"):
        partition_examples(_examples({"common": 50, "lonely": 1}), _cfg())
