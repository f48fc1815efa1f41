"""Detector option_order: statistics by hand, errors out of every denominator (an error is no
answer), the null (correctness independent of the option order) and a planted canonical-order
memory."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from medexp.answers.table import Status, response_row
from medexp.benchmarks.base import Example
from medexp.benchmarks.options import LETTERS
from medexp.detectors.answer_arms import pairs, paired_statistics, probe_facts, joined
from medexp.detectors.option_order import option_order_detector
from medexp.probes.choice import option_order_probes
from medexp.stats.sample_size import paired_accuracy_mde
from tests.answers.judging import judged_table
from tests.detectors.mmdetect_tables import answer_choices, choice_examples, option_order_config

STRATA = ["answer_type", "content_type"]


def hand_examples(n_options=4) -> list[Example]:
    options = tuple(f"option {j}" for j in range(n_options))
    return [Example(f"hand::{i}", i, Path("x.png"), f"q{i}", options[i % n_options], options,
                    {"answer_type": "OPEN" if i < 3 else "CLOSED"}) for i in range(6)]


def reply(probe, how: str):
    wrong = next(letter for letter in LETTERS[:len(probe.options)] if letter != probe.gold)
    if how == "right":
        return response_row(probe, probe.gold)
    if how == "wrong":
        return response_row(probe, wrong)
    if how == "no_answer":
        return response_row(probe, "maybe")
    return response_row(probe, "", None, Status.error, error="connection reset", cause="connection")


# (original, shuffled) per example: ex0, ex1 lose; ex2 keeps; ex3 gains; ex4's original is an
# error (no reply: the pair leaves); ex5's shuffled reply commits to nothing (a no-answer: not correct).
HAND = [("right", "wrong"), ("right", "wrong"), ("right", "right"), ("wrong", "right"), ("error", "right"),
        ("right", "no_answer")]


@pytest.fixture(scope="module")
def hand():
    probes = option_order_probes(hand_examples(), seed=0)
    plan = dict(zip([f"hand::{i}" for i in range(6)], HAND))
    rows = [reply(p, plan[p.example_id][0 if p.kind == "original" else 1]) for p in probes.probes]
    table = judged_table(rows, probes.probes)
    skipped = [("hand::9::option_shuffle", "no options: the example is not multiple choice")]
    return option_order_detector(table, probe_facts(probes.probes, STRATA), option_order_config(strata=STRATA),
                                 seed=1, skipped=skipped)


def test_cr_pcr_delta_phi_and_mcnemar_by_hand(hand):
    m = hand.metrics
    # ex4 has no answer on its original: x = 1 1 1 0 1, y = 0 0 1 1 0 over the other five
    assert (m["cr"], m["pcr"], m["delta"], m["phi"]) == pytest.approx((0.8, 0.4, -0.4, 0.6))
    assert (m["b"], m["c"], m["n_pairs"], m["n_excluded_pairs"]) == (3, 1, 5, 1)
    assert m["p_value"] == pytest.approx(5 / 16)  # P(Bin(4, 1/2) >= 3)
    assert (m["statistic"], m["n_examples"], m["flag"]) == (pytest.approx(-0.4), 5, 0.0)
    assert m["cr_ci_low"] == pytest.approx(sps.binomtest(4, 5).proportion_ci(method="wilson").low)


def test_errors_are_counted_never_scored(hand):
    m = hand.metrics
    assert (m["n_error_original"], m["n_no_answer_original"], m["n_ok_original"]) == (1, 0, 5)
    assert (m["n_error_shuffled"], m["n_no_answer_shuffled"], m["n_ok_shuffled"]) == (0, 1, 5)
    assert not any(name.endswith("_excl") for name in m)  # one convention: errors are no answers
    assert m["n_skipped"] == 1 and m["n_skipped.no_options"] == 1
    assert hand.extra_tables["skipped"][["example_id", "reason"]].values.tolist() == [["hand::9", "no options"]]


def test_an_error_on_one_arm_never_counts_as_a_wrong_answer():
    """A server whose failures hit the shuffled arm only: errors as wrong answers would flag it."""
    probes = option_order_probes(hand_examples(), seed=0)
    rows = [reply(p, "right" if p.kind == "original" or p.example_id < "hand::3" else "error") for p in probes.probes]
    table = judged_table(rows, probes.probes)
    m = option_order_detector(table, probe_facts(probes.probes, STRATA), option_order_config(strata=STRATA),
                              seed=1).metrics
    assert (m["n_pairs"], m["n_excluded_pairs"], m["b"], m["c"]) == (3, 3, 0, 0)
    assert m["p_value"] == 1.0 and m["flag"] == 0.0


def test_tables_per_example_per_stratum_and_letters(hand):
    per_example = hand.table.set_index("example_id")
    assert per_example["lost"].tolist() == pytest.approx([1, 1, 0, 0, np.nan, 1], nan_ok=True)
    assert per_example["gained"].tolist() == pytest.approx([0, 0, 0, 1, np.nan, 0], nan_ok=True)
    assert per_example.loc["hand::4", "first_status"] == "error" and not per_example.loc["hand::4", "paired"]
    strata = hand.extra_tables["strata"].set_index(["field", "value"])
    assert strata.loc[("answer_type", "OPEN"), ["cr", "pcr", "b", "c"]].tolist() == pytest.approx([1, 1 / 3, 2, 0])
    assert strata.loc[("answer_type", "CLOSED"), ["cr", "pcr", "b", "c"]].tolist() == pytest.approx([0.5, 0.5, 1, 1])
    assert set(strata.index.get_level_values(0)) == {"answer_type", "content_type"}  # content_type: "(missing)"
    letters = hand.extra_tables["letters"].set_index("letter")
    # canonical golds of ex0..ex5 are A B C D A B; the error row is not an ok reply
    assert letters["gold_original"].tolist() == pytest.approx([1 / 5, 2 / 5, 1 / 5, 1 / 5])
    assert letters["blind_original"].tolist() == pytest.approx([0.25] * 4)
    assert hand.metrics["chance_rate"] == pytest.approx(0.25)
    assert len(hand.extra_tables["per_probe"]) == 12
    assert set(hand.figures) == {"option_order"}


def test_several_variants_pool_by_relabelling():
    probes = option_order_probes(hand_examples(), seed=0, n_variants=2)
    plan = {"hand::0": ["right", "wrong", "wrong"], "hand::1": ["right", "wrong", "right"],
            "hand::2": ["right", "right", "right"], "hand::3": ["wrong", "right", "wrong"],
            "hand::4": ["right", "wrong", "wrong"], "hand::5": ["right", "wrong", "wrong"]}
    rows = [reply(p, plan[p.example_id][0 if p.kind == "original" else 1 + p.meta["variant"]]) for p in probes.probes]
    table = judged_table(rows, probes.probes)
    result = option_order_detector(table, probe_facts(probes.probes, STRATA),
                                   option_order_config(n_variants=2, n_permutations=20000, strata=STRATA), seed=3)
    m = result.metrics
    y = [0, 0.5, 1, 0.5, 0, 0]
    assert (m["cr"], m["pcr"], m["n_variants"]) == pytest.approx((5 / 6, np.mean(y), 2))
    assert m["phi"] == pytest.approx(np.mean([1, 0.5, 0, 0, 1, 1]))
    assert (m["b"], m["c"]) == (7, 1)
    # exact: which of each example's three probes is the original, all 3^6 labellings
    outcomes = [[1, 0, 0], [1, 0, 1], [1, 1, 1], [0, 1, 0], [1, 0, 0], [1, 0, 0]]
    statistic = lambda picks: np.mean([(3 * o[k] - sum(o)) / 2 for o, k in zip(outcomes, picks)])  # noqa: E731
    observed = statistic([0] * 6)
    exact = np.mean([statistic(p) >= observed - 1e-12 for p in itertools.product(range(3), repeat=6)])
    assert m["p_value"] == pytest.approx(exact, abs=0.01)


def _core_p(examples, seed, right, n_variants=1, error=0.0):
    probes = option_order_probes(examples, seed, n_variants)
    table = joined(answer_choices(probes.probes, right, seed, error=error), probe_facts(probes.probes),
                   ("original", "option_shuffle"))
    return paired_statistics(pairs(table, "original", "option_shuffle"), 499, seed, 0.95)["p_value"]


@pytest.mark.parametrize("n_variants", [1, 3])
@pytest.mark.extended
def test_null_a_model_without_order_memory_rejects_at_most_alpha(n_variants):
    """Correctness depends on the example only, never on the option order: p-values are valid."""
    runs, p_values = 200, []
    for seed in range(runs):
        examples = choice_examples(60, seed)
        ability = dict(zip((e.example_id for e in examples), np.random.default_rng(seed + 10_000).uniform(0.2, 0.95, 60)))
        p_values.append(_core_p(examples, seed, lambda probe: ability[probe.example_id], n_variants, error=0.03))
    p_values = np.array(p_values)
    for alpha in (0.05, 0.1, 0.25):
        rejections = int(np.sum(p_values <= alpha))
        assert sps.binomtest(rejections, runs, alpha, alternative="greater").pvalue > 0.001, (alpha, rejections)
    assert np.mean(p_values) > 0.4


def test_power_a_memorised_canonical_order_is_detected():
    """A third of the examples answered right whenever the options sit in canonical order (power
    at alpha 0.01 measured over 100 seeds: 72% with 150 examples, 95% with 300)."""
    detected = 0
    for seed in range(10):
        examples = choice_examples(300, seed)
        rng = np.random.default_rng(seed + 20_000)
        ability = dict(zip((e.example_id for e in examples), rng.uniform(0.2, 0.8, 300)))
        memorised = {e.example_id for e in examples if rng.random() < 1 / 3}

        def right(probe):
            return 1.0 if probe.kind == "original" and probe.example_id in memorised else ability[probe.example_id]

        probes = option_order_probes(examples, seed)
        table = answer_choices(probes.probes, right, seed)
        result = option_order_detector(table, probe_facts(probes.probes, STRATA),
                                       option_order_config(strata=STRATA, alpha=0.01), seed)
        detected += result.metrics["flag"] == 1.0
        assert result.metrics["delta"] < 0 and result.metrics["b"] > result.metrics["c"]
    assert detected >= 8


def test_the_same_cell_seed_gives_the_same_p_value():
    examples = choice_examples(40, 0)
    probes = option_order_probes(examples, 0, 3)
    table = answer_choices(probes.probes, lambda probe: 0.6, 0)
    facts = probe_facts(probes.probes, STRATA)
    cfg = option_order_config(n_variants=3, n_permutations=999, strata=STRATA)
    first = option_order_detector(table, facts, cfg, seed=7).metrics
    assert option_order_detector(table, facts, cfg, seed=7).metrics == first


def test_a_table_without_shuffled_probes_is_refused():
    probes = option_order_probes(hand_examples(), seed=0)
    originals = [p for p in probes.probes if p.kind == "original"]
    table = judged_table([reply(p, "right") for p in originals], originals)
    with pytest.raises(ValueError, match=r"no \['option_shuffle'\] probes"):
        option_order_detector(table, probe_facts(originals), option_order_config(), seed=0)


def test_inflation_with_its_image_clustered_interval_and_the_mde(hand):
    """The four effect metrics: inflation = CR - PCR; all six hand examples share x.png, so one
    cluster and no interval; two questions per image give half as many clusters as pairs."""
    m = hand.metrics
    assert m["inflation"] == pytest.approx(m["cr"] - m["pcr"]) == pytest.approx(0.4)
    assert m["inflation_n_clusters"] == 1 and np.isnan(m["inflation_ci_low"]) and np.isnan(m["inflation_ci_high"])
    assert m["mde"] == pytest.approx(paired_accuracy_mde(5, 0.01, 0.8, 0.25, "one"))
    examples = [replace(example, image=Path(f"images/{example.position // 2}.png"))
                for example in choice_examples(60, 3)]
    probes = option_order_probes(examples, 3)
    table = answer_choices(probes.probes, lambda probe: 0.9 if probe.kind == "original" else 0.5, 3)
    result = option_order_detector(table, probe_facts(probes.probes, STRATA), option_order_config(strata=STRATA), 3)
    m = result.metrics
    assert m["inflation"] == pytest.approx(m["cr"] - m["pcr"]) and m["inflation"] > 0
    assert m["inflation_ci_low"] < m["inflation"] < m["inflation_ci_high"]
    assert m["mde"] == pytest.approx(paired_accuracy_mde(int(m["n_pairs"]), 0.01, 0.8, 0.25, "one"))
    effect = result.extra_tables["effect"].iloc[0]
    assert (effect["resampling_unit"], effect["n_clusters"], effect["n_items"]) == ("image", 30, m["n_pairs"])
    assert m["inflation_n_clusters"] == 30
    assert option_order_detector(table, probe_facts(probes.probes, STRATA), option_order_config(strata=STRATA),
                                 3).metrics["inflation_ci_low"] == m["inflation_ci_low"]  # seeded from the cell
