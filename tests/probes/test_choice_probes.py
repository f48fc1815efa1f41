"""MM-Detect's multiple-choice probes: original, option shuffles that always move the gold, text-only."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from medexp.benchmarks.base import Example
from medexp.probes.choice import (
    EXAMPLE_META,
    canonical_gold,
    gold_moving_order,
    option_order_probes,
    original_probe,
    shuffled_probe,
    text_only_probes,
)

IMAGE = Path("scan.png")


def example(index: int, options=("CT", "MRI", "X-Ray", "Ultrasound"), answer=None, image=IMAGE, **meta) -> Example:
    answer = answer if answer is not None else options[index % len(options)] if options else "yes"
    return Example(f"demo::test::{index:04d}", index, image, f"Which modality is this, case {index}?", answer,
                   tuple(options) if options else None, {"answer_type": "OPEN", **meta})


def test_original_keeps_the_released_order_and_letters_the_gold_by_position():
    probe = original_probe(example(2))
    assert probe.probe_id == "demo::test::0002::original" and probe.kind == "original"
    assert probe.options == ("CT", "MRI", "X-Ray", "Ultrasound") and probe.gold == "C" and probe.gold_text == "X-Ray"
    assert probe.image == IMAGE and probe.refusal is None
    assert probe.meta[EXAMPLE_META] == {"answer_type": "OPEN"}
    # the gold is matched ignoring case and spacing when no option is exactly the answer
    assert canonical_gold(example(0, answer=" x-ray ")) == 2


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({"options": None}, "no options"),
    ({"answer": "PET"}, "gold not among options"),
    ({"options": ("yes", "Yes", "no"), "answer": "YES"}, "ambiguous gold"),
])
def test_examples_without_a_usable_gold_option_are_skipped_with_the_reason(kwargs, reason):
    probes = option_order_probes([example(0, **kwargs), example(1)], seed=0)
    assert [p.example_id for p in probes.probes] == ["demo::test::0001"] * 2
    assert probes.skipped == [("demo::test::0000::option_shuffle", probes.skipped[0][1])]
    assert probes.skipped[0][1].startswith(reason)
    assert probes.skip_counts() == {reason: 1}


def test_a_single_option_cannot_move():
    probes = option_order_probes([example(0, options=("yes",))], seed=0)
    assert not probes.probes and probes.skip_counts() == {"fewer than two options": 1}


def test_the_gold_always_moves_and_the_rest_is_a_permutation():
    examples = [example(i, options=tuple(f"option {j}" for j in range(2 + i % 5))) for i in range(200)]
    probes = option_order_probes(examples, seed=11, n_variants=3)
    originals = {p.example_id: p for p in probes.probes if p.kind == "original"}
    shuffles = [p for p in probes.probes if p.kind == "option_shuffle"]
    assert len(shuffles) == 600
    for probe in shuffles:
        original = originals[probe.example_id]
        assert probe.gold != original.gold
        assert probe.gold_text == original.gold_text
        assert sorted(probe.options) == sorted(original.options)
        assert probe.question == original.question and probe.image == original.image
    ids = [p.probe_id for p in shuffles[:3]]
    assert ids == [f"demo::test::0000::option_shuffle::{v}" for v in range(3)]


def test_permutations_are_seeded_per_example_and_reproducible():
    examples = [example(i) for i in range(30)]
    first = option_order_probes(examples, seed=4, n_variants=2).probes
    again = option_order_probes(examples, seed=4, n_variants=2).probes
    assert [p.options for p in first] == [p.options for p in again]
    other = option_order_probes(examples, seed=5, n_variants=2).probes
    assert [p.options for p in first] != [p.options for p in other]
    # an example's shuffle does not depend on the other examples probed
    alone = shuffled_probe(examples[7], seed=4, variant=1)
    within = next(p for p in first if p.probe_id == alone.probe_id)
    assert alone == within
    # the variants of one example are drawn from different streams
    assert len({shuffled_probe(examples[0], 4, v).options for v in range(12)}) > 3


def test_every_gold_moving_permutation_is_equally_likely():
    """Uniform over the 18 permutations of 4 options that move the gold (3 new gold letters x 3!)."""
    counts = Counter(tuple(gold_moving_order(4, 0, np.random.default_rng(seed))) for seed in range(9000))
    allowed = [order for order in itertools.permutations(range(4)) if order[0] != 0]
    assert set(counts) == set(allowed)
    observed = np.array([counts[order] for order in allowed])
    assert sps.chisquare(observed).pvalue > 0.001
    new_gold = Counter(order.index(0) for order in counts.elements())
    assert set(new_gold) == {1, 2, 3}
    assert sps.chisquare([new_gold[1], new_gold[2], new_gold[3]]).pvalue > 0.001


def test_the_gold_letter_spreads_over_the_other_letters_on_a_probe_set():
    examples = [example(i, answer="CT") for i in range(600)]  # the gold is always at A
    letters = Counter(p.gold for p in option_order_probes(examples, seed=0).probes if p.kind == "option_shuffle")
    assert set(letters) == {"B", "C", "D"}
    assert sps.chisquare([letters["B"], letters["C"], letters["D"]]).pvalue > 0.001


def test_text_only_removes_the_image_and_appends_the_refusal():
    probes = text_only_probes([example(1), example(2)], refusal="I don't know")
    assert [p.kind for p in probes.probes] == ["original", "text_only"] * 2
    text = probes.probes[1]
    assert text.probe_id == "demo::test::0001::text_only" and text.image is None
    assert text.options == ("CT", "MRI", "X-Ray", "Ultrasound", "I don't know")
    assert (text.gold, text.refusal) == ("B", "E")
    assert text.meta["n_options"] == 4
    assert probes.probes[0].image == IMAGE and probes.probes[0].gold == "B"


def test_text_only_skips_what_it_cannot_probe():
    probes = text_only_probes([example(0, image=None), example(1, options=("I don't know", "yes"), answer="yes"),
                               example(2, options=None), example(3)])
    reasons = dict(probes.skipped)
    assert reasons["demo::test::0000::text_only"].startswith("no image")
    assert reasons["demo::test::0001::text_only"].startswith("refusal clash")
    assert reasons["demo::test::0002::text_only"].startswith("no options")
    assert [p.example_id for p in probes.probes] == ["demo::test::0003"] * 2
    with pytest.raises(ValueError, match="empty"):
        text_only_probes([example(3)], refusal="  ")
