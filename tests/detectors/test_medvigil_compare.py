"""Paired MCS comparisons (null, power, calibration), the letter-rotation arm, sensitivity ranking."""

from __future__ import annotations

import numpy as np
import pytest

from medexp.benchmarks.options import LETTERS
from medexp.detectors.medvigil import probe_facts, scored_table
from medexp.detectors.medvigil_metrics import medvigil_intervals, sensitivity_table
from medexp.detectors.medvigil_compare import (
    letter_preference_test,
    paired_difference,
    rotation_effect,
    sensitivity_ranking,
)
from medexp.kernel.hashing import derive_seed
from medexp.probes.base import Probe
from medexp.stats.bootstrap import pair_seed
from tests.detectors.medvigil_tables import answers, battery, simulated_model, skill_probabilities


def _scored(probes, responses):
    return scored_table(responses, probe_facts(probes))


def test_identical_tables_differ_by_zero_with_p_one():
    probes, responses = simulated_model(60, 0.6, seed=1)
    table = _scored(probes, responses)
    result = paired_difference(table, table.copy(), seed=pair_seed(0, "a", "b"), n_resamples=300).set_index("metric")
    for metric in ("mcs", "cap", "safe", "ground", "sfr_w", "vgr", "overall"):
        row = result.loc[metric]
        assert row.difference == 0.0 and row.ci_low == 0.0 and row.ci_high == 0.0
        assert row.p_value == 1.0 and row.p_value_bootstrap == 1.0


def test_a_safer_model_is_detected():
    probes = battery(150)
    difficulty = np.random.default_rng(0).normal(0, 0.15, 150)
    careful = skill_probabilities(probes, 0.65, 0.8, difficulty)
    careless = skill_probabilities(probes, 0.65, 0.35, difficulty)
    safe = _scored(probes, answers(probes, careful, np.random.default_rng(1)))
    unsafe = _scored(probes, answers(probes, careless, np.random.default_rng(2)))
    row = paired_difference(safe, unsafe, seed=3, n_resamples=500).set_index("metric").loc["mcs"]
    assert row.difference > 10 and row.ci_low > 0 and row.p_value < 0.01 and row.p_value_bootstrap < 0.01
    capability = paired_difference(safe, unsafe, seed=3, n_resamples=500).set_index("metric").loc["cap"]
    assert abs(capability.difference) < 10 and capability.p_value > 0.01  # same skill on answer probes


def test_adding_a_model_does_not_change_another_models_interval():
    tables = {name: _scored(*simulated_model(40, skill, seed=index))
              for index, (name, skill) in enumerate([("a", 0.7), ("b", 0.5), ("c", 0.3)])}

    def intervals(names):
        return {name: medvigil_intervals(tables[name], seed=derive_seed(0, f"model={name}"), n_resamples=200)
                for name in names}

    alone = intervals(["a"])["a"]
    among = intervals(["c", "b", "a"])["a"]
    assert alone.equals(among)
    pair = paired_difference(tables["a"], tables["b"], seed=pair_seed(0, "model=a", "model=b"), n_resamples=200)
    intervals(["c"])
    again = paired_difference(tables["b"], tables["a"], seed=pair_seed(0, "model=b", "model=a"), n_resamples=200)
    assert np.allclose(pair["difference"], -again["difference"], equal_nan=True)


def test_cases_held_by_one_table_only_are_reported():
    probes, responses = simulated_model(30, 0.6, seed=4)
    table = _scored(probes, responses)
    fewer = table[table["case"] != "case0000"]
    row = paired_difference(table, fewer, seed=1, n_resamples=100).iloc[0]
    assert (row.n_cases, row.n_cases_only_a, row.n_cases_only_b) == (29, 1, 0)
    with pytest.raises(ValueError, match="share no case"):
        paired_difference(table[table["case"] == "case0001"], table[table["case"] == "case0002"], seed=1)


@pytest.mark.slow
@pytest.mark.extended
def test_paired_mcs_test_holds_its_level_under_the_null():
    """Two models with the same per-probe probabilities on shared, heterogeneous cases.

    200 replicates of 80 cases (300 resamples, 1,000 swaps each): the swap test's rejection rate
    at alpha 0.05 stays near 0.05 (NOTES_medvigil.md reports 600 replicates). About 50 s.
    """
    probes = battery(80)
    facts = probe_facts(probes)
    rejections = 0
    for replicate in range(200):
        rng = np.random.default_rng(replicate)
        difficulty = rng.normal(0, 0.15, 80)
        p = skill_probabilities(probes, 0.6, 0.5, difficulty)
        a = scored_table(answers(probes, p, rng), facts)
        b = scored_table(answers(probes, p, rng), facts)
        row = paired_difference(a, b, seed=replicate, n_resamples=300, metrics=["mcs"], n_permutations=1000).iloc[0]
        rejections += row.p_value < 0.05
    assert 0.01 <= rejections / 200 <= 0.10


def _rotated_battery(probes, rng):
    """The same probes with their options permuted (gold and refusal move with their texts)."""
    out = []
    for probe in probes:
        order = rng.permutation(len(probe.options))
        options = tuple(probe.options[i] for i in order)
        position = {old: new for new, old in enumerate(order)}
        out.append(Probe(probe.probe_id, probe.example_id, probe.kind, probe.question,
                         LETTERS[position[LETTERS.index(probe.gold)]], options=options,
                         refusal=LETTERS[position[LETTERS.index(probe.refusal)]], meta=probe.meta))
    return out


def _letter_biased(probes, accuracy, favourite, rng):
    """A model that knows the answer with probability ``accuracy`` and otherwise picks ``favourite``."""
    rows = answers(probes, np.full(len(probes), accuracy), rng)
    guess = ~rows["correct"].to_numpy()
    rows.loc[guess, "choice"] = favourite
    rows.loc[guess, "response"] = favourite
    rows["correct"] = rows["choice"] == rows["gold"]
    return rows


def test_rotation_reveals_a_letter_preference():
    fixed_probes = battery(120)
    rotated_probes = _rotated_battery(fixed_probes, np.random.default_rng(0))
    fixed = _scored(fixed_probes, _letter_biased(fixed_probes, 0.4, "A", np.random.default_rng(1)))
    rotated = _scored(rotated_probes, _letter_biased(rotated_probes, 0.4, "A", np.random.default_rng(1)))
    effect = rotation_effect(fixed, rotated, seed=2, n_resamples=300)
    rows = effect["metrics"].set_index("metric")
    # fixed letters put the gold at A on answer probes: guessing A is credited there
    assert rows.loc["acc_orig", "position_confound"] > 30 and rows.loc["acc_orig", "ci_low"] > 0
    assert rows.loc["cap", "position_confound"] > 30
    # and never on traps, whose gold is E in the fixed arm
    assert rows.loc["sfr", "fixed"] == pytest.approx(100 - 40, abs=8)
    letters = effect["letters"]
    fixed_a = letters[(letters["arm"] == "fixed") & (letters["letter"] == "A")].iloc[0]
    assert fixed_a["chosen_share"] > 60
    biased = letter_preference_test(rotated)
    assert biased["p_value"] < 1e-6 and biased["n"] == len(rotated)


def test_a_position_blind_model_passes_the_letter_test():
    probes = _rotated_battery(battery(200), np.random.default_rng(5))
    rng = np.random.default_rng(6)
    table = _scored(probes, answers(probes, np.full(len(probes), 0.6), rng, random_wrong=True))
    assert letter_preference_test(table)["p_value"] > 0.001


def test_sensitivity_ranking():
    tables = {f"m{index}": _scored(*simulated_model(60, skill, seed=index, refusal_rate=refusal))
              for index, (skill, refusal) in enumerate([(0.8, 0.7), (0.7, 0.3), (0.5, 0.6), (0.4, 0.2), (0.6, 0.5),
                                                        (0.3, 0.4)])}
    ranking = sensitivity_ranking({name: sensitivity_table(table) for name, table in tables.items()}, top_k=3)
    default = ranking[ranking["variant"] == "w=(1,2,3,5,8), Ground=clip(VGR+50)"].iloc[0]
    assert default["spearman"] == pytest.approx(1.0) and default["top3_overlap"] == 3 and default["n_models"] == 6
    assert default["leader"] == "m0"
    assert len(ranking) == 8 and ranking["spearman"].between(-1, 1).all()


def test_letter_test_ignores_unanswered_rows():
    probes, responses = simulated_model(10, 0.5, seed=0)
    responses.loc[:4, "status"] = "error"
    responses.loc[:4, ["choice", "correct"]] = [None, False]
    responses.loc[:4, ["error", "error_cause"]] = ["Timeout: no reply", "timeout"]
    table = _scored(probes, responses)
    assert letter_preference_test(table)["n"] == len(table) - 5
