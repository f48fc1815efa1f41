"""Detector open_ended: right with options where wrong without them, against a guess, by hand; the
drop's McNemar; the null (knowledge the same in both forms, guessing among options) and the power
against the exact binomial power."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf
from scipy import stats as sps

from medexp.answers.table import Status, response_row
from medexp.benchmarks.base import Example
from medexp.config.schemas import OpenEndedConfig
from medexp.detectors.answer_arms import probe_facts
from medexp.detectors.open_ended import open_ended_detector, options_only_metrics
from medexp.probes.option_forms import OPEN_ENDED, open_ended_probes
from tests.answers.judging import NO_ANSWER_REPLY, judged_table

STRATA = ["answer_type"]


def config(**changes):
    return OmegaConf.structured(OpenEndedConfig(name="open_ended", family="open_ended", strata=STRATA, **changes))


def hand_examples():
    four = [Example(f"hand::{i}", i, Path(f"{i % 2}.png"), f"q{i}", "MRI", ("CT", "MRI", "X-Ray", "Ultrasound"),
                    {"answer_type": "OPEN"}) for i in range(5)]
    two = [Example(f"hand::{i}", i, Path(f"{i % 2}.png"), f"q{i}", "yes", ("yes", "no"), {"answer_type": "CLOSED"})
           for i in range(5, 9)]
    return four + two


# (with options, open-ended) per example
HAND = [("right", "wrong"), ("right", "no_answer"), ("wrong", "wrong"), ("right", "right"), ("error", "wrong"),
        ("right", "wrong"), ("wrong", "right"), ("right", "wrong"), ("wrong", "error")]


def reply(probe, how):
    if how == "error":
        return response_row(probe, "", None, Status.error, error="timeout", cause="timeout")
    if how == "no_answer":
        return response_row(probe, NO_ANSWER_REPLY if probe.is_choice else "I cannot tell from this image.")
    if probe.kind == OPEN_ENDED:
        return response_row(probe, probe.gold if how == "right" else "Ultrasound" if probe.gold == "MRI" else "no")
    return response_row(probe, probe.gold if how == "right" else "A" if probe.gold != "A" else "B")


def hand_result():
    probes = open_ended_probes(hand_examples())
    rows = [reply(p, HAND[int(p.example_id.rsplit("::", 1)[1])][0 if p.kind == "original" else 1])
            for p in probes.probes]
    return open_ended_detector(judged_table(rows, probes.probes), probe_facts(probes.probes, STRATA), config(),
                               seed=0, skipped=probes.skipped)


def test_options_only_rightness_against_chance_by_hand():
    m = hand_result().metrics
    # pairs: 0 1 2 3 5 6 7 (4 and 8 lack an answer on one arm); open wrong (a no-answer is wrong): 0 1 2 5 7
    # right with options among them: 0 1 5 7; chances 1/4 1/4 1/4 1/2 1/2
    assert (m["n_pairs"], m["n_excluded_pairs"], m["n_open_wrong"]) == (7, 2, 5)
    assert m["rate_options_only"] == pytest.approx(4 / 5)
    assert m["chance_rate"] == pytest.approx((3 * 0.25 + 2 * 0.5) / 5)
    chances = [0.25, 0.25, 0.25, 0.5, 0.5]
    brute = sum(np.prod([p if o else 1 - p for p, o in zip(chances, outcome)])
                for outcome in np.ndindex(*(2,) * 5) if sum(outcome) >= 4)
    assert m["p_value"] == pytest.approx(brute)
    assert m["statistic"] == pytest.approx(4 / 5 - 1.75 / 5) and m["inflation"] == pytest.approx(4 / 5 - 1.75 / 5)


def test_the_drop_and_its_mcnemar_by_hand():
    m = hand_result().metrics
    # with options: 1 1 0 1 1 0 1 ; open: 0 0 0 1 0 1 0 -> b = 4, c = 1
    assert (m["acc_options"], m["acc_open"]) == pytest.approx((5 / 7, 2 / 7))
    assert m["drop"] == pytest.approx(3 / 7) and (m["b"], m["c"]) == (4, 1)
    assert m["p_drop"] == pytest.approx(sps.binomtest(4, 5, 0.5, alternative="greater").pvalue)
    assert (m["n_error_options"], m["n_error_open"], m["n_no_answer_open"]) == (1, 1, 1)


def test_tables_and_figure():
    result = hand_result()
    per_example = result.table.set_index("example_id")
    assert per_example.loc["hand::0", "right_with_options_only"] == 1.0
    assert per_example.loc["hand::5", "chance"] == 0.5
    assert set(result.extra_tables) == {"per_probe", "strata", "effect", "skipped"}
    assert result.figures["open_ended"] is not None


def simulated_flags(know, options_only, n, seeds, alpha=0.01):
    """Four-option items: known (right in both forms) with ``know``; otherwise right with options
    with chance 1/4 plus ``options_only`` (memory of the letter), never right open-ended."""
    flags = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        known = rng.random(n) < know
        frame = pd.DataFrame({"options_correct": known | (rng.random(n) < 0.25 + options_only), "chance": 0.25})
        flags.append(options_only_metrics(frame[~known], 0.95)["p_value"] < alpha)
    return np.array(flags, dtype=float)


@pytest.mark.extended  # simulated flag rates: the slow checks run after the default suite
def test_null_a_model_that_knows_or_guesses_flags_at_most_alpha():
    flags = simulated_flags(0.4, 0.0, 150, range(600))
    assert flags.mean() <= sps.binom.ppf(0.999, 600, 0.01) / 600


@pytest.mark.extended  # simulated flag rates: the slow checks run after the default suite
def test_power_matches_the_exact_binomial_power():
    flags = simulated_flags(0.0, 0.1, 150, range(600))
    critical = int(sps.binom.isf(0.01, 150, 0.25)) + 1  # the smallest k with P(X >= k) < 0.01
    assert sps.binom.sf(critical - 1, 150, 0.25) < 0.01 <= sps.binom.sf(critical - 2, 150, 0.25)
    expected = sps.binom.sf(critical - 1, 150, 0.35)
    assert 0.2 < expected < 0.95
    low, high = sps.binom.ppf([0.0005, 0.9995], 600, expected) / 600
    assert low <= flags.mean() <= high


def test_every_pair_right_without_options_leaves_nothing_to_test():
    probes = open_ended_probes(hand_examples()[:3])
    result = open_ended_detector(judged_table([response_row(p, p.gold) for p in probes.probes], probes.probes),
                                 probe_facts(probes.probes, STRATA), config(), seed=0)
    m = result.metrics
    assert (m["n_pairs"], m["n_open_wrong"], m["flag"]) == (3, 0, 0.0)
    assert np.isnan(m["p_value"]) and np.isnan(m["inflation"]) and np.isnan(m["mde"])
