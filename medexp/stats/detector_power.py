"""The closed power formulas a detector can declare (``power=`` in its declaration,
:mod:`medexp.detectors.declaration`): the family of its test, the side it takes and the units of
its n and its effect, and the MDE a cell logs at its n and alpha.

The formulas are :mod:`medexp.stats.sample_size`'s. A detector's alpha comes from its config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from medexp.stats import sample_size as pw


@dataclass(frozen=True)
class PowerFormula:
    family: str       # paired_accuracy | above_chance | auc | spearman | one_sample_t | two_sample_t | two_proportions
    sided: str        # "one" or "two", as the detector's test
    n_unit: str       # what n counts
    effect_unit: str  # what the MDE and a target effect= measure
    test: str         # the test the detector runs, in words


PAIRED_ACCURACY = "paired_accuracy"
ABOVE_CHANCE = "above_chance"
AUC = "auc"
SPEARMAN = "spearman"
ONE_SAMPLE_T = "one_sample_t"
TWO_SAMPLE_T = "two_sample_t"
TWO_PROPORTIONS = "two_proportions"
MDE_POWER = 0.8  # the power at which a cell's logged MDE is stated
_SMALLEST_N = {SPEARMAN: 4, ONE_SAMPLE_T: 2, TWO_SAMPLE_T: 2}  # Fisher's z needs n - 3 > 0; a t-test two values (per sample)

ACCURACY_DIFFERENCE = "accuracy difference (fraction; 0.05 = 5 accuracy points)"  # the McNemar detectors' effect unit
ACCURACY_ABOVE_CHANCE = "accuracy above chance (fraction; 0.05 = 5 accuracy points)"  # the chance-test detectors' effect unit


class NoPowerFormula(LookupError):
    """A detector without a closed power formula (simulated or testing nothing), or an unknown one."""


def detector_mde(formula: PowerFormula, n: int, alpha: float, power: float = MDE_POWER, chance: float | None = None,
                 n_negative: int | None = None) -> float:
    """The MDE of a detector with this power ``formula`` at a cell's n and alpha, in the formula's effect unit.

    ``n`` is what the formula's ``n_unit`` counts (members for an AUC or a two-sample t-test, whose
    non-members are ``n_negative``; the first group of two proportions, the second ``n_negative``).
    Paired accuracy uses var(D) at :func:`medexp.stats.sample_size.paired_difference_variance`'s
    defaults (accuracy 0.5, correlation 0.5), the assumptions ``python -m medexp.power`` states, so
    a cell's logged MDE is the one that command printed before the run; above-chance tests need
    the cell's ``chance`` rate, two proportions the second group's assumed rate (as ``chance``).
    NaN where n is below what the formula needs."""
    smallest = _SMALLEST_N.get(formula.family, 1)
    if n < smallest or (n_negative is not None and n_negative < (smallest if formula.family == TWO_SAMPLE_T else 1)) \
            or (chance is not None and not 0 < chance < 1):
        return math.nan  # too few units (or a certain chance rate) for the formula: a cell never fails for it
    if formula.family == PAIRED_ACCURACY:
        return pw.paired_accuracy_mde(n, alpha, power, pw.paired_difference_variance(), formula.sided)
    if formula.family == ABOVE_CHANCE:
        if chance is None:
            raise ValueError(f"{formula.test}: tests accuracy above chance: its MDE needs the chance rate")
        return pw.above_chance_mde(n, chance, alpha, power, formula.sided)
    if formula.family == AUC:
        if n_negative is None:
            raise ValueError(f"{formula.test}: tests an AUC: its MDE needs the non-members (n_negative)")
        return pw.auc_mde(n, n_negative, alpha, power, formula.sided)
    if formula.family == SPEARMAN:
        return pw.spearman_mde(n, alpha, power, formula.sided)
    if formula.family == ONE_SAMPLE_T:
        return pw.one_sample_t_mde(n, alpha, power, formula.sided)
    if formula.family == TWO_SAMPLE_T:
        if n_negative is None:
            raise ValueError(f"{formula.test}: compares two samples: its MDE needs the non-members (n_negative)")
        return pw.two_sample_t_mde(n, n_negative, alpha, power, formula.sided)
    if formula.family == TWO_PROPORTIONS:
        if n_negative is None or chance is None:
            raise ValueError(f"{formula.test}: compares two proportions: its MDE needs the second group (n_negative) "
                             "and its assumed rate (chance)")
        return pw.two_proportions_mde(n, n_negative, chance, alpha, power, formula.sided)
    raise NotImplementedError(f"no MDE for formula family {formula.family!r}")
