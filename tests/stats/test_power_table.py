"""medexp.stats.power_table: every detector kind has a power formula or a stated reason why not."""

from __future__ import annotations

import math

import pytest

from medexp.config.schemas import DETECTOR_SCHEMAS
from medexp.stats import power as pw
from medexp.stats.power_table import (
    BY_SIMULATION,
    POWER_FORMULAS,
    WITHOUT_TEST,
    NoPowerFormula,
    detector_mde,
    power_formula,
)


def test_every_detector_kind_is_covered_once():
    assert set(POWER_FORMULAS) | set(BY_SIMULATION) | set(WITHOUT_TEST) == set(DETECTOR_SCHEMAS)
    assert len(POWER_FORMULAS) + len(BY_SIMULATION) + len(WITHOUT_TEST) == len(DETECTOR_SCHEMAS)


def test_every_formula_names_a_computed_family_and_a_side():
    families = {"paired_accuracy", "above_chance", "auc", "spearman", "one_sample_t", "two_sample_t"}
    for formula in POWER_FORMULAS.values():
        assert formula.family in families and formula.sided in pw.SIDES


def test_a_kind_without_a_formula_says_why():
    with pytest.raises(NoPowerFormula, match="mink_tail.*no closed power formula; its MDE is by simulation"):
        power_formula("mink_tail")
    with pytest.raises(NoPowerFormula, match="composition_sweep.*tests nothing"):
        power_formula("composition_sweep")
    with pytest.raises(NoPowerFormula, match="unknown detector kind 'nope'"):
        power_formula("nope")


def test_a_cells_mde_is_its_kinds_formula_at_the_power_commands_assumptions():
    # paired accuracy at var(D) = 2 p (1 - p) (1 - r) = 0.25 (p = r = 0.5), one-sided as McNemar here
    assert detector_mde("option_order", 451, 0.01) == pytest.approx(pw.paired_accuracy_mde(451, 0.01, 0.8, 0.25, "one"))
    assert detector_mde("medvigil", 80, 0.05) == pytest.approx(pw.paired_accuracy_mde(80, 0.05, 0.8, 0.25, "two"))
    assert detector_mde("text_only", 200, 0.01, chance=0.3) == pytest.approx(pw.above_chance_mde(200, 0.3, 0.01))
    with pytest.raises(ValueError, match="needs the chance rate"):
        detector_mde("text_only", 200, 0.01)
    # the other formulas: the AUC (members, non-members), Spearman's rho, Cohen's d over shards
    assert detector_mde("membership", 300, 0.01, n_negative=200) == pytest.approx(pw.auc_mde(300, 200, 0.01))
    assert detector_mde("exch_rank", 451, 0.01) == pytest.approx(pw.spearman_mde(451, 0.01))
    assert detector_mde("exch", 50, 0.01) == pytest.approx(pw.one_sample_t_mde(50, 0.01))
    with pytest.raises(ValueError, match="non-members"):
        detector_mde("membership", 300, 0.01)
    # dataset_inference: Cohen's d of half B's members against its non-members; codec: an AUC
    assert detector_mde("dataset_inference", 200, 0.01, n_negative=150) == pytest.approx(pw.two_sample_t_mde(200, 150, 0.01))
    assert detector_mde("codec", 400, 0.01, n_negative=400) == pytest.approx(pw.auc_mde(400, 400, 0.01))
    with pytest.raises(ValueError, match="non-members"):
        detector_mde("dataset_inference", 200, 0.01)
    assert math.isnan(detector_mde("dataset_inference", 200, 0.01, n_negative=1))
    # too few units for a formula: no MDE, never a failed cell
    assert math.isnan(detector_mde("exch_rank", 3, 0.01)) and math.isnan(detector_mde("exch", 1, 0.01))
    assert math.isnan(detector_mde("text_only", 20, 0.01, chance=1.0))
    with pytest.raises(NoPowerFormula, match="by simulation"):
        detector_mde("mink_tail", 200, 0.01)
