"""Detector none_option: kept letter against the none option, by hand; a guesser's flag rate (the
null) and a position-recalling model's (the power) against the exact sign-test power."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf
from scipy import stats as sps

from medexp.answers.table import Status, response_row
from medexp.benchmarks.base import Example
from medexp.config.schemas import NoneOptionConfig
from medexp.detectors.answer_arms import probe_facts
from medexp.detectors.none_option import none_option_detector, outcome_metrics
from medexp.probes.option_forms import NONE_OPTION, none_option_probes
from tests.answers.judging import NO_ANSWER_REPLY, judged_table

STRATA = ["answer_type"]


def config(**changes):
    return OmegaConf.structured(NoneOptionConfig(name="none_option", family="none_option", strata=STRATA, **changes))


def hand_examples():
    return [Example(f"hand::{i}", i, Path(f"{i % 3}.png"), f"q{i}", "MRI", ("CT", "MRI", "X-Ray", "Ultrasound"),
                    {"answer_type": "OPEN"}) for i in range(9)]


# what the none-option probe's reply does, per example (the original is answered right on 0-5)
HAND = ["kept", "kept", "kept", "kept", "none", "other", "kept", "no_answer", "error"]


def reply(probe, how):
    if probe.kind != NONE_OPTION:
        right = int(probe.example_id.rsplit("::", 1)[1]) < 6
        return response_row(probe, probe.gold if right else "A")
    if how == "kept":
        return response_row(probe, probe.meta["kept_letter"])
    if how == "none":
        return response_row(probe, probe.gold)
    if how == "other":
        return response_row(probe, "A")
    if how == "no_answer":
        return response_row(probe, NO_ANSWER_REPLY)
    return response_row(probe, "", None, Status.error, error="timeout", cause="timeout")


def run(probes, rows, **cfg):
    table = judged_table(rows, probes.probes)
    return none_option_detector(table, probe_facts(probes.probes, STRATA), config(**cfg), seed=0,
                                skipped=probes.skipped)


def test_rates_and_sign_test_by_hand():
    probes = none_option_probes(hand_examples(), seed=0)
    result = run(probes, [reply(p, HAND[int(p.example_id.rsplit("::", 1)[1])]) for p in probes.probes])
    m = result.metrics
    # 8 answered (example 8 is an error); kept 5, none 1, other 2 (a wrong option, a no-answer)
    assert (m["n_examples"], m["n_unanswered"], m["n_kept"], m["n_none"], m["n_other"]) == (8, 1, 5, 1, 2)
    assert (m["rate_kept"], m["rate_none"], m["rate_other"]) == pytest.approx((5 / 8, 1 / 8, 2 / 8))
    # P(Bin(6, 1/2) >= 5) = (6 + 1) / 64
    assert m["p_value"] == pytest.approx(7 / 64)
    assert m["statistic"] == pytest.approx(4 / 8) and m["inflation"] == pytest.approx(4 / 8)
    # right as released on 0-5 (answered: 0-7): kept on 0-3 of those six
    assert m["acc_original"] == pytest.approx(6 / 8) and m["kept_after_right"] == pytest.approx(4 / 6)
    assert m["kept_share_blind"] == pytest.approx(1 / 4)
    assert m["inflation_n_clusters"] == 3  # three images
    assert (m["n_error_none_option"], m["n_no_answer_none_option"]) == (1, 1)
    assert m["flag"] == 0.0
    per_example = result.table.set_index("example_id")
    assert per_example.loc["hand::0", "kept_letter"] == "B" and per_example.loc["hand::0", "none_letter"] == "D"
    assert set(result.extra_tables) == {"per_probe", "strata", "letters", "effect", "skipped"}
    assert result.figures["none_option"] is not None


def exact_power(n, p_kept, p_none, alpha):
    """P(the one-sided sign test rejects) when each of n items keeps the letter with p_kept, picks
    the none option with p_none, else neither: summed over m = K + N exactly."""
    power, q = 0.0, p_kept / (p_kept + p_none)
    for m in range(1, n + 1):
        ks = np.arange(m + 1)
        p_values = sps.binom.sf(ks - 1, m, 0.5)
        reject = ks[p_values < alpha]
        if reject.size:
            power += sps.binom.pmf(m, n, p_kept + p_none) * sps.binom.sf(reject[0] - 1, m, q)
    return power


def simulated_flags(p_kept, p_none, n, seeds, alpha=0.01):
    """The sign test's flags over simulated none-option arms of ``n`` answered examples (the
    detector's own statistic, :func:`outcome_metrics`; the whole detector is checked by hand above)."""
    flags = []
    for seed in seeds:
        draw = np.random.default_rng(seed).random(n)
        frame = pd.DataFrame({"kept": (draw < p_kept).astype(float),
                              "none": ((draw >= p_kept) & (draw < p_kept + p_none)).astype(float),
                              "original_status": Status.ok.value, "original_correct": True})
        flags.append(outcome_metrics(frame, 0.95)["p_value"] < alpha)
    return np.array(flags, dtype=float)


@pytest.mark.extended  # simulated flag rates: the slow checks run after the default suite
def test_null_a_blind_guesser_flags_at_most_alpha():
    # four or five options, a uniform guess: kept and none are each 1/k; 1/4.5 on average
    flags = simulated_flags(0.22, 0.22, 120, range(600))
    assert flags.mean() <= sps.binom.ppf(0.999, 600, 0.01) / 600


@pytest.mark.extended  # simulated flag rates: the slow checks run after the default suite
def test_power_matches_the_exact_sign_test_power():
    flags = simulated_flags(0.35, 0.2, 120, range(600))
    expected = exact_power(120, 0.35, 0.2, 0.01)
    assert 0.2 < expected < 0.95  # a dose where power is neither nil nor certain
    low, high = sps.binom.ppf([0.0005, 0.9995], 600, expected) / 600
    assert low <= flags.mean() <= high
