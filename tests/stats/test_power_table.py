"""medexp.stats.power_table: every detector kind has a power formula or a stated reason why not."""

from __future__ import annotations

import pytest

from medexp.config.schemas import DETECTOR_SCHEMAS
from medexp.stats import power as pw
from medexp.stats.power_table import BY_SIMULATION, POWER_FORMULAS, NoPowerFormula, power_formula


def test_every_detector_kind_is_covered_once():
    assert set(POWER_FORMULAS) | set(BY_SIMULATION) == set(DETECTOR_SCHEMAS)
    assert not set(POWER_FORMULAS) & set(BY_SIMULATION)


def test_every_formula_names_a_computed_family_and_a_side():
    families = {"paired_accuracy", "above_chance", "auc", "spearman", "one_sample_t"}
    for formula in POWER_FORMULAS.values():
        assert formula.family in families and formula.sided in pw.SIDES


def test_a_kind_without_a_formula_says_why():
    with pytest.raises(NoPowerFormula, match="mink_tail.*by simulation, not yet available"):
        power_formula("mink_tail")
    with pytest.raises(NoPowerFormula, match="unknown detector kind 'nope'"):
        power_formula("nope")
