"""Detector text_only: accuracy without the image against uniform and prior chance, the refusal
rate, the paired comparison with the image; the null (a guesser, a prior-exploiting clean model)
and a model that knows answers without the image."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from medexp.answers.table import Status, response_row
from medexp.benchmarks.base import Example
from medexp.config.schemas import ChanceModel
from medexp.detectors.answer_arms import joined, probe_facts
from medexp.detectors.text_only import chance_rates, text_only_detector
from medexp.probes.choice import text_only_probes
from medexp.stats.paired import accuracy_above_chances
from medexp.stats.sample_size import above_chance_mde
from tests.answers.judging import judged_table
from tests.detectors.mmdetect_tables import answer_choices, choice_examples, text_only_config

STRATA = ["answer_type", "content_type"]


def hand_examples() -> list[Example]:
    yes_no = [Example(f"hand::{i}", i, Path("x.png"), f"q{i}", answer, ("yes", "no"), {"answer_type": "CLOSED"})
              for i, answer in enumerate(["yes", "yes", "no", "yes", "yes", "no"])]
    four = [Example(f"hand::{i}", i, Path("x.png"), f"q{i}", "CT", ("CT", "MRI", "X-Ray", "Ultrasound"),
                    {"answer_type": "OPEN"}) for i in range(6, 8)]
    return yes_no + four


# (with image, without image) per example
HAND = {"hand::0": ("right", "right"), "hand::1": ("right", "refuse"), "hand::2": ("wrong", "right"),
        "hand::3": ("right", "wrong"), "hand::4": ("error", "right"), "hand::5": ("right", "error"),
        "hand::6": ("right", "right"), "hand::7": ("wrong", "no_answer")}


def reply(probe, how):
    if how == "right":
        return response_row(probe, probe.gold)
    if how == "refuse":
        return response_row(probe, "I don't know")
    if how == "wrong":
        wrong = next(letter for letter in "ABCD"[:len(probe.options)] if letter not in (probe.gold, probe.refusal))
        return response_row(probe, wrong)
    if how == "no_answer":
        return response_row(probe, "hmm")
    return response_row(probe, "", None, Status.error, error="timeout", cause="timeout")


def hand_result(**cfg):
    probes = text_only_probes(hand_examples())
    rows = [reply(p, HAND[p.example_id][0 if p.kind == "original" else 1]) for p in probes.probes]
    table = judged_table(rows, probes.probes)
    return text_only_detector(table, probe_facts(probes.probes, STRATA),
                              text_only_config(strata=STRATA, **cfg), seed=0, skipped=probes.skipped)


def test_uniform_chance_by_hand():
    m = hand_result(chance="uniform").metrics
    # example 5's text-only probe is an error, no answer: 7 answered; right on 0, 2, 4, 6; refusal
    # once; chance 1/2 x 5 and 1/4 x 2
    assert (m["acc_text_only"], m["idk_rate"], m["chance_rate"]) == pytest.approx((4 / 7, 1 / 7, 3 / 7))
    assert m["n_text_only"] == 7 and m["n_examples"] == 7
    assert m["acc_answered"] == pytest.approx(4 / 5)  # ok replies choosing an answer: 0, 2, 3, 4, 6
    probabilities = [0.5] * 5 + [0.25] * 2
    brute = sum(np.prod([p if o else 1 - p for p, o in zip(probabilities, outcome)])
                for outcome in np.ndindex(*(2,) * 7) if sum(outcome) >= 4)
    assert m["p_value"] == pytest.approx(brute)
    assert m["statistic"] == pytest.approx(4 / 7 - 3 / 7)
    # the inflation is the same accuracy above chance, with the above-chance test's MDE at n = 7
    assert m["inflation"] == pytest.approx(4 / 7 - 3 / 7)
    assert m["mde"] == pytest.approx(above_chance_mde(7, 3 / 7, 0.01, 0.8, "one"))
    # the text-only probes have no image: each is clustered by its example's (all share x.png)
    assert m["inflation_n_clusters"] == 1 and np.isnan(m["inflation_ci_low"])
    assert (m["n_error_text_only"], m["n_no_answer_text_only"], m["n_error_image"]) == (1, 1, 1)
    assert not any(name.endswith("_excl") for name in m)


def test_paired_with_the_image_by_hand():
    m = hand_result(chance="uniform").metrics
    # examples 4 and 5 lack an answer on one arm; image: 1 1 0 1 1 0 ; text: 1 0 1 0 1 0
    assert m["acc_image"] == pytest.approx(4 / 6)
    assert (m["image_b"], m["image_c"], m["n_pairs"], m["n_excluded_pairs"]) == (2, 1, 6, 2)
    assert m["p_image_gain"] == pytest.approx(sps.binomtest(2, 3, 0.5, alternative="greater").pvalue)
    assert m["image_delta"] == pytest.approx(3 / 6 - 4 / 6)


def test_prior_chance_by_hand():
    result = hand_result(chance="prior", min_prior_group=2)
    groups = result.extra_tables["chance_groups"].set_index("group")
    assert groups.loc["no | yes", ["n", "most_frequent_gold", "prior_rate", "rate_used"]].tolist() == \
        [6, "yes", pytest.approx(4 / 6), "prior"]
    assert groups.loc["ct | mri | ultrasound | x-ray", "prior_rate"] == 1.0  # both golds are CT
    assert result.metrics["chance_rate"] == pytest.approx((5 * 4 / 6 + 2 * 1.0) / 7)  # the answered probes
    # groups smaller than min_prior_group use the uniform rate
    fallback = hand_result(chance="prior", min_prior_group=3)
    assert fallback.metrics["chance_rate"] == pytest.approx((5 * 4 / 6 + 2 * 0.25) / 7)
    assert fallback.extra_tables["chance_groups"]["rate_used"].tolist() == ["uniform", "prior"]


def test_prior_by_adds_meta_fields_to_the_group():
    probes = text_only_probes(hand_examples())
    facts = probe_facts(probes.probes, ["answer_type"])
    table = judged_table([reply(p, "right") for p in probes.probes], probes.probes)
    text = joined(table, facts, ("original", "text_only"))
    text = text[text["kind"] == "text_only"]
    _, groups = chance_rates(text, ChanceModel.prior, ["answer_type"], 1)
    assert groups["group"].tolist() == ["ct | mri | ultrasound | x-ray || answer_type=OPEN",
                                        "no | yes || answer_type=CLOSED"]
    with pytest.raises(ValueError, match=r"prior_by names \['organ'\]"):
        chance_rates(text, ChanceModel.prior, ["organ"], 1)


def test_tables_and_figure():
    result = hand_result(chance="uniform")
    per_example = result.table.set_index("example_id")
    assert per_example.loc["hand::1", "refused"] and not per_example.loc["hand::0", "refused"]
    assert per_example["chance"].tolist() == pytest.approx([0.5] * 6 + [0.25] * 2)
    strata = result.extra_tables["strata"].set_index(["field", "value"])
    assert strata.loc[("answer_type", "OPEN"), "acc_text_only"] == pytest.approx(0.5)
    assert set(result.figures) == {"text_only"}


def _text_p(examples, seed, right, chance, refuse=0.0, wrong=None):
    probes = text_only_probes(examples)
    table = joined(answer_choices(probes.probes, right, seed, refuse=refuse, wrong=wrong),
                   probe_facts(probes.probes), ("original", "text_only"))
    text = table[table["kind"] == "text_only"]
    rates, _ = chance_rates(text, chance, [], 5)
    return accuracy_above_chances(text["correct"].to_numpy(bool), rates).p_value


def guess(probe) -> float:
    """A blind guesser's chance of being right: one of the answer options, uniformly."""
    return 1.0 / (len(probe.options) - (probe.refusal is not None))


@pytest.mark.extended
def test_null_a_blind_guesser_rejects_at_most_alpha_under_uniform_chance():
    runs = 300
    p_values = np.array([_text_p(choice_examples(60, seed), seed,
                                 lambda probe: guess(probe) if probe.image is None else 0.7,
                                 ChanceModel.uniform, refuse=0.1) for seed in range(runs)])
    for alpha in (0.01, 0.05, 0.1):
        rejections = int(np.sum(p_values <= alpha))
        assert sps.binomtest(rejections, runs, alpha, alternative="greater").pvalue > 0.001, (alpha, rejections)
    assert np.mean(p_values) > 0.4


def _prior_guess(probe, rng):
    """A clean model that knows answer frequencies: "yes" for yes/no, else a uniform guess."""
    letters = [letter for letter in "ABCDE"[:len(probe.options)] if letter != probe.refusal]
    if "yes" in probe.options:
        return "ABCDE"[probe.options.index("yes")]
    return letters[int(rng.integers(len(letters)))]


@pytest.mark.extended
def test_null_a_clean_model_using_answer_priors_is_flagged_by_uniform_chance_but_not_by_prior():
    """Yes/no golds are "yes" 75% of the time and the clean model always says yes (no memory)."""
    runs, uniform, prior = 150, [], []
    for seed in range(runs):
        examples = [e for e in choice_examples(240, seed, yes_share=0.75) if e.options == ("yes", "no")]
        for chance, out in ((ChanceModel.uniform, uniform), (ChanceModel.prior, prior)):
            out.append(_text_p(examples, seed, lambda probe: 0.0, chance, wrong=_prior_guess))
    uniform, prior = np.array(uniform), np.array(prior)
    assert np.mean(uniform <= 0.01) > 0.8  # the uniform null reads answer priors as leakage
    assert sps.binomtest(int(np.sum(prior <= 0.05)), runs, 0.05, alternative="greater").pvalue > 0.001


def _refuse_or_guess_wrong(probe, rng):
    """An unknown answer: half the time the refusal, else a wrong answer option."""
    if rng.random() < 0.5:
        return probe.refusal
    return next(letter for letter in "ABCDE" if letter not in (probe.gold, probe.refusal))


def test_power_answers_known_without_the_image_are_detected():
    """A third of the answers known without the image; the rest guessed, and a wrong guess is a
    refusal half the time."""
    detected = 0
    for seed in range(10):
        examples = choice_examples(200, seed)
        rng = np.random.default_rng(seed + 30_000)
        known = {e.example_id for e in examples if rng.random() < 1 / 3}
        probes = text_only_probes(examples)
        table = answer_choices(probes.probes, lambda probe: 1.0 if probe.example_id in known else guess(probe), seed,
                               wrong=lambda probe, rng: _refuse_or_guess_wrong(probe, rng) if probe.image is None
                               else probe.gold)
        result = text_only_detector(table, probe_facts(probes.probes, STRATA), text_only_config(strata=STRATA), seed)
        detected += result.metrics["flag"] == 1.0
        assert result.metrics["idk_rate"] > 0.1 and result.metrics["acc_image"] == 1.0
    assert detected >= 9
