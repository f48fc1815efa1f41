"""medexp.stats.detector_power and the detectors' power entries: every detector declares a formula, a simulated test or why it has none."""

from __future__ import annotations

import math

import pytest

from medexp.config.schemas import DETECTOR_SCHEMAS
from medexp.detectors import declaration_of, declarations
from medexp.detectors.declaration import Simulated, Untested
from medexp.detectors.power_simulation import SIMULATED_TESTS
from medexp.stats import sample_size as pw
from medexp.stats.detector_power import PowerFormula, detector_mde


def formula(name: str) -> PowerFormula:
    return declaration_of(name).power


def test_every_detector_declares_a_formula_a_simulation_or_no_test():
    for declaration in declarations():
        assert isinstance(declaration.power, (PowerFormula, Simulated, Untested)), declaration.name
    assert sorted(declaration.name for declaration in declarations()) == sorted(DETECTOR_SCHEMAS)


def test_every_formula_names_a_computed_family_and_a_side():
    families = {"paired_accuracy", "above_chance", "auc", "spearman", "one_sample_t", "two_sample_t", "two_proportions"}
    for declaration in declarations():
        if isinstance(declaration.power, PowerFormula):
            assert declaration.power.family in families and declaration.power.sided in pw.SIDES


def test_a_simulated_detector_has_a_simulated_test_and_a_counted_n():
    for declaration in declarations():
        if isinstance(declaration.power, Simulated):
            assert declaration.name in SIMULATED_TESTS and declaration.power_count is not None
    assert isinstance(declaration_of("composition_sweep").power, Untested)
    assert declaration_of("composition_sweep").power_count is None


def test_a_cells_mde_is_its_kinds_formula_at_the_power_commands_assumptions():
    # paired accuracy at var(D) = 2 p (1 - p) (1 - r) = 0.25 (p = r = 0.5), one-sided as McNemar here
    assert detector_mde(formula("option_order"), 451, 0.01) == pytest.approx(pw.paired_accuracy_mde(451, 0.01, 0.8, 0.25, "one"))
    assert detector_mde(formula("medvigil"), 80, 0.05) == pytest.approx(pw.paired_accuracy_mde(80, 0.05, 0.8, 0.25, "two"))
    assert detector_mde(formula("text_only"), 200, 0.01, chance=0.3) == pytest.approx(pw.above_chance_mde(200, 0.3, 0.01))
    with pytest.raises(ValueError, match="needs the chance rate"):
        detector_mde(formula("text_only"), 200, 0.01)
    # the other formulas: the AUC (members, non-members), Spearman's rho, Cohen's d over shards
    assert detector_mde(formula("membership"), 300, 0.01, n_negative=200) == pytest.approx(pw.auc_mde(300, 200, 0.01))
    assert detector_mde(formula("exch_rank"), 451, 0.01) == pytest.approx(pw.spearman_mde(451, 0.01))
    assert detector_mde(formula("exch"), 50, 0.01) == pytest.approx(pw.one_sample_t_mde(50, 0.01))
    with pytest.raises(ValueError, match="non-members"):
        detector_mde(formula("membership"), 300, 0.01)
    # dataset_inference: Cohen's d of half B's members against its non-members; codec: an AUC
    assert detector_mde(formula("dataset_inference"), 200, 0.01, n_negative=150) == pytest.approx(pw.two_sample_t_mde(200, 150, 0.01))
    assert detector_mde(formula("codec"), 400, 0.01, n_negative=400) == pytest.approx(pw.auc_mde(400, 400, 0.01))
    with pytest.raises(ValueError, match="non-members"):
        detector_mde(formula("dataset_inference"), 200, 0.01)
    assert math.isnan(detector_mde(formula("dataset_inference"), 200, 0.01, n_negative=1))
    # source_naming: two proportions, audited images against control images, from a control rate of 1/k
    assert detector_mde(formula("source_naming"), 300, 0.01, chance=1 / 6, n_negative=250) == pytest.approx(
        pw.two_proportions_mde(300, 250, 1 / 6, 0.01))
    with pytest.raises(ValueError, match="two proportions"):
        detector_mde(formula("source_naming"), 300, 0.01, chance=1 / 6)
    # too few units for a formula: no MDE, never a failed cell
    assert math.isnan(detector_mde(formula("exch_rank"), 3, 0.01)) and math.isnan(detector_mde(formula("exch"), 1, 0.01))
    assert math.isnan(detector_mde(formula("text_only"), 20, 0.01, chance=1.0))
