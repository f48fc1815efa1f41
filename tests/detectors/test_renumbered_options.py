"""Detector renumbered_options: statistics by hand (the exact McNemar p from binomial
coefficients), letter replies to numbered probes counted as no-answers, several label sets pooled
by relabelling, skips counted, the null (correctness independent of the labels) and a planted
letter memory."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from scipy import stats as sps

from medexp.answers.table import Status, response_row
from medexp.benchmarks.base import Example
from medexp.benchmarks.options import LETTERS
from medexp.config.schemas import RenumberedOptionsConfig
from medexp.detectors.answer_arms import joined, paired_metrics, probe_facts
from medexp.detectors.renumbered_options import renumbered_options_detector
from medexp.probes.option_forms import renumbered_probes
from medexp.stats.sample_size import paired_accuracy_mde
from tests.answers.judging import judged_table
from tests.detectors.mmdetect_tables import choice_examples

STRATA = ["answer_type"]
ROMAN = ["i", "ii", "iii", "iv", "v", "vi"]


def config(**changes):
    return OmegaConf.structured(RenumberedOptionsConfig(name="renumbered_options", family="renumbered_options",
                                                        strata=STRATA, **changes))


def hand_examples(n: int = 6, n_options: int = 4) -> list[Example]:
    options = tuple(f"option {j}" for j in range(n_options))
    return [Example(f"hand::{i}", i, Path("x.png"), f"q{i}", options[i % n_options], options,
                    {"answer_type": "OPEN" if i < 3 else "CLOSED"}) for i in range(n)]


def reply(probe, how: str):
    """A reply as a model writes it, in the labels the probe shows: ``right``, ``wrong``,
    ``letter`` (the gold's letter, whatever the labels), ``error`` (no reply)."""
    gold = LETTERS.index(probe.gold)
    if how == "right":
        return response_row(probe, probe.shown_labels[gold])
    if how == "wrong":
        return response_row(probe, probe.shown_labels[(gold + 1) % len(probe.options)])
    if how == "letter":
        return response_row(probe, probe.gold)
    return response_row(probe, "", None, Status.error, error="connection reset", cause="connection")


def run(examples, plan, label_sets=None, seed=1, **changes):
    """The detector over ``examples`` answered by ``plan``: example id -> how each of its probes
    (original first, then one per label set) is answered."""
    sets = label_sets or [[str(number) for number in range(1, 27)]]
    probes = renumbered_probes(examples, sets)
    rows = [reply(p, plan[p.example_id][0 if p.kind == "original" else 1 + p.meta["variant"]]) for p in probes.probes]
    table = judged_table(rows, probes.probes)
    return renumbered_options_detector(table, probe_facts(probes.probes, STRATA), config(label_sets=sets, **changes),
                                       seed=seed, skipped=probes.skipped)


# (original, renumbered) per example: ex0 and ex5 lose; ex1 replies the gold's letter to the numbered
# probe (a no-answer: lost); ex2 keeps; ex3 gains; ex4's original is an error (the pair leaves).
HAND = {"hand::0": ("right", "wrong"), "hand::1": ("right", "letter"), "hand::2": ("right", "right"),
        "hand::3": ("wrong", "right"), "hand::4": ("error", "right"), "hand::5": ("right", "wrong")}


@pytest.fixture(scope="module")
def hand():
    return run(hand_examples(), HAND)


def test_accuracies_the_drop_and_the_exact_mcnemar_p_by_hand(hand):
    m = hand.metrics
    # over the five answered pairs: letters 1 1 1 0 1, renumbered 0 0 1 1 0
    assert (m["acc_letters"], m["acc_renumbered"], m["delta"], m["phi"]) == pytest.approx((0.8, 0.4, 0.4, 0.6))
    assert (m["b"], m["c"], m["n_pairs"], m["n_excluded_pairs"]) == (3, 1, 5, 1)
    # one-sided: P(Bin(b + c, 1/2) >= b)
    assert m["p_value"] == pytest.approx(sum(math.comb(4, k) for k in (3, 4)) / 2 ** 4)
    assert (m["statistic"], m["n_examples"], m["flag"], m["n_label_sets"]) == (pytest.approx(0.4), 5, 0.0, 1)
    assert m["acc_letters_ci_low"] == pytest.approx(sps.binomtest(4, 5).proportion_ci(method="wilson").low)
    assert m["inflation"] == pytest.approx(m["delta"])
    assert m["mde"] == pytest.approx(paired_accuracy_mde(5, 0.01, 0.8, 0.25, "one"))


def test_a_letter_reply_to_a_numbered_probe_is_a_no_answer_and_counted(hand):
    m = hand.metrics
    assert (m["n_ok_renumbered"], m["n_no_answer_renumbered"], m["n_error_renumbered"]) == (5, 1, 0)
    assert (m["n_ok_letters"], m["n_no_answer_letters"], m["n_error_letters"]) == (5, 0, 1)
    assert m["no_answer_rate_renumbered"] == pytest.approx(1 / 6) and m["no_answer_rate_letters"] == 0.0
    assert (m["letter_replies_renumbered"], m["gold_letter_replies_renumbered"]) == (1, 1)
    per_probe = hand.extra_tables["per_probe"].set_index("probe_id")
    assert per_probe.loc["hand::1::renumbered::0", ["response", "status"]].tolist() == ["B", "no_answer"]
    assert per_probe.loc["hand::3::renumbered::0", ["response", "choice"]].tolist() == ["4", "D"]  # positional


def test_tables_per_example_per_stratum_and_outcomes(hand):
    per_example = hand.table.set_index("example_id")
    assert per_example["lost"].tolist() == pytest.approx([1, 1, 0, 0, np.nan, 1], nan_ok=True)
    assert not per_example.loc["hand::4", "paired"]
    strata = hand.extra_tables["strata"].set_index(["field", "value"])
    # OPEN: ex0..ex2, all right under letters, one kept; CLOSED: ex3 gains, ex5 loses (ex4 out)
    assert strata.loc[("answer_type", "OPEN"), ["acc_letters", "acc_renumbered", "delta", "b", "c"]].tolist() == \
        pytest.approx([1, 1 / 3, 2 / 3, 2, 0])
    assert strata.loc[("answer_type", "CLOSED"), ["acc_letters", "acc_renumbered", "delta", "b", "c"]].tolist() == \
        pytest.approx([0.5, 0.5, 0.0, 1, 1])
    outcomes = hand.extra_tables["outcomes"].set_index("arm")
    assert outcomes.loc["renumbered", ["n_replies", "right", "wrong", "no_answer"]].tolist() == \
        pytest.approx([6, 3 / 6, 2 / 6, 1 / 6])
    assert outcomes.loc["letters", ["n_replies", "right", "no_answer"]].tolist() == pytest.approx([5, 4 / 5, 0])
    assert set(hand.figures) == {"renumbered_options"}
    assert hand.extra_tables["effect"].iloc[0]["resampling_unit"] == "image"


def test_a_symmetric_table_gives_the_exact_null_p():
    """b = c: the one-sided exact p is P(Bin(2b, 1/2) >= b), above one half: no evidence."""
    plan = {f"hand::{i}": ("right", "wrong") if i % 2 == 0 else ("wrong", "right") for i in range(8)}
    m = run(hand_examples(8), plan).metrics
    assert (m["b"], m["c"], m["delta"]) == (4, 4, 0.0)
    assert m["p_value"] == pytest.approx(sum(math.comb(8, k) for k in range(4, 9)) / 2 ** 8)
    assert m["flag"] == 0.0


def test_several_label_sets_pool_by_relabelling():
    plan = {"hand::0": ["right", "wrong", "wrong"], "hand::1": ["right", "wrong", "right"],
            "hand::2": ["right", "right", "right"], "hand::3": ["wrong", "right", "wrong"],
            "hand::4": ["right", "letter", "wrong"], "hand::5": ["right", "wrong", "wrong"]}
    result = run(hand_examples(), plan, [[str(n) for n in range(1, 10)], ROMAN], seed=3, n_permutations=20000)
    m = result.metrics
    outcomes = [[1, 0, 0], [1, 0, 1], [1, 1, 1], [0, 1, 0], [1, 0, 0], [1, 0, 0]]
    assert (m["acc_letters"], m["acc_renumbered"], m["n_label_sets"]) == \
        pytest.approx((5 / 6, np.mean([np.mean(o[1:]) for o in outcomes]), 2))
    assert (m["b"], m["c"]) == (7, 1)
    # exact: which of each example's three probes is the original, all 3^6 labellings
    statistic = lambda picks: np.mean([(3 * o[k] - sum(o)) / 2 for o, k in zip(outcomes, picks)])  # noqa: E731
    observed = statistic([0] * 6)
    exact = np.mean([statistic(p) >= observed - 1e-12 for p in itertools.product(range(3), repeat=6)])
    assert m["p_value"] == pytest.approx(exact, abs=0.01)
    per_probe = result.extra_tables["per_probe"].set_index("probe_id")
    assert per_probe.loc["hand::0::renumbered::1", "response"] == "ii"  # read in the roman labels it showed
    assert per_probe.loc["hand::1::renumbered::1", ["status", "correct"]].tolist() == ["ok", True]


def test_examples_that_cannot_be_renumbered_are_skipped_and_counted():
    examples = [*hand_examples(4), *(Example(f"five::{i}", 4 + i, Path("x.png"), "q", "e", tuple("abcde"), {})
                                     for i in range(2)),
                Example("open::0", 6, Path("x.png"), "q", "liver", None, {})]
    plan = {example.example_id: ("right", "wrong") for example in examples}
    result = run(examples, plan, [["1", "2", "3", "4"]])
    m = result.metrics
    assert m["n_pairs"] == 4 and m["n_skipped"] == 3
    assert (m["n_skipped.too_many_options"], m["n_skipped.no_options"]) == (2, 1)
    skipped = result.extra_tables["skipped"]
    assert sorted(skipped["example_id"]) == ["five::0", "five::1", "open::0"]


def test_a_table_without_renumbered_probes_is_refused():
    probes = renumbered_probes(hand_examples())
    originals = [p for p in probes.probes if p.kind == "original"]
    table = judged_table([reply(p, "right") for p in originals], originals)
    with pytest.raises(ValueError, match=r"no \['renumbered'\] probes"):
        renumbered_options_detector(table, probe_facts(originals), config(), seed=0)


def simulated(examples, right, seed: int, letter_memory=frozenset()):
    """The judged table of a simulated model: right with probability ``right(probe)``, else another
    option's label; on the examples of ``letter_memory`` right as released and, renumbered, the
    gold's letter (what a model recalling the letter replies)."""
    rng = np.random.default_rng(seed)
    probes = renumbered_probes(examples)
    rows = []
    for probe in probes.probes:
        gold = LETTERS.index(probe.gold)
        if probe.example_id in letter_memory:
            rows.append(response_row(probe, probe.gold if probe.kind == "renumbered" else probe.shown_labels[gold]))
            continue
        if rng.random() < right(probe):
            rows.append(response_row(probe, probe.shown_labels[gold]))
            continue
        others = [label for index, label in enumerate(probe.shown_labels) if index != gold]
        rows.append(response_row(probe, others[int(rng.integers(len(others)))]))
    return judged_table(rows, probes.probes), probe_facts(probes.probes, STRATA)


@pytest.mark.extended
def test_null_a_model_that_ignores_the_labels_rejects_at_most_alpha():
    """Correctness depends on the example only, never on its labels: p-values are valid (the
    detector's paired test, without its bootstrap and figure)."""
    runs, p_values = 200, []
    for seed in range(runs):
        examples = choice_examples(60, seed)
        ability = dict(zip((e.example_id for e in examples), np.random.default_rng(seed + 10_000).uniform(0.2, 0.95, 60)))
        table, facts = simulated(examples, lambda probe: ability[probe.example_id], seed)
        arms = joined(table, facts, ("original", "renumbered"))
        p_values.append(paired_metrics(arms, "original", "renumbered", 499, seed, 0.95)["p_value"])
    p_values = np.array(p_values)
    for alpha in (0.05, 0.1, 0.25):
        rejections = int(np.sum(p_values <= alpha))
        assert sps.binomtest(rejections, runs, alpha, alternative="greater").pvalue > 0.001, (alpha, rejections)
    assert np.mean(p_values) > 0.4


def test_power_a_model_recalling_letters_is_flagged():
    """A fifth of the examples answered by the remembered letter: right as released, a letter reply
    (no answer) when renumbered."""
    for seed in range(3):
        examples = choice_examples(150, seed)
        rng = np.random.default_rng(seed + 20_000)
        ability = dict(zip((e.example_id for e in examples), rng.uniform(0.2, 0.8, 150)))
        memory = frozenset(e.example_id for e in examples if rng.random() < 0.2)
        table, facts = simulated(examples, lambda probe: ability[probe.example_id], seed, memory)
        m = renumbered_options_detector(table, facts, config(), seed).metrics
        assert m["flag"] == 1.0 and m["delta"] > 0 and m["b"] > m["c"]
        assert m["gold_letter_replies_renumbered"] == len(memory) == m["n_no_answer_renumbered"]


def test_label_sets_that_differ_only_in_case_are_refused():
    """Replies are read case-insensitively: "ii" and "II" would be one label."""
    check = RenumberedOptionsConfig.check_values
    assert check(OmegaConf.create({"label_sets": [["1", "2"], ["i", "ii"]]}), "detector") is None
    assert "case aside" in check(OmegaConf.create({"label_sets": [["a", "A", "b"]]}), "detector")
    assert "at least one label set" in check(OmegaConf.create({"label_sets": []}), "detector")
