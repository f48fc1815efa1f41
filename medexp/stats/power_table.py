"""Which power formula answers for each detector kind (the schema names of
``medexp.config.schemas.DETECTOR_SCHEMAS``), with the side its test takes and the units of its
n and its effect; the kinds whose test has no closed formula are listed with the test they run
(their MDE is simulated: ``medexp.detectors.power_simulation``), and the kinds that test nothing
with what they are.

The formulas are :mod:`medexp.stats.power`'s. A detector's alpha comes from its config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from medexp.stats import power as pw


@dataclass(frozen=True)
class PowerFormula:
    family: str       # paired_accuracy | above_chance | auc | spearman | one_sample_t | two_sample_t
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
MDE_POWER = 0.8  # the power at which a cell's logged MDE is stated
_SMALLEST_N = {SPEARMAN: 4, ONE_SAMPLE_T: 2, TWO_SAMPLE_T: 2}  # Fisher's z needs n - 3 > 0; a t-test two values (per sample)

_MCNEMAR = "accuracy difference (fraction; 0.05 = 5 accuracy points)"

POWER_FORMULAS = {
    "option_order": PowerFormula(PAIRED_ACCURACY, "one", "items with options", _MCNEMAR,
                                 "one-sided exact McNemar: canonical order right more often than shuffled"),
    "slot_guess": PowerFormula(PAIRED_ACCURACY, "one", "items (an upper bound: items without a shared keyword "
                               "are skipped at run time)", _MCNEMAR,
                               "one-sided exact McNemar: the original wording filled right more often"),
    "perturbation_gap": PowerFormula(PAIRED_ACCURACY, "one", "original/twin pairs", _MCNEMAR,
                                     "one-sided exact McNemar: original right more often than its twin"),
    "medvigil": PowerFormula(PAIRED_ACCURACY, "two", "cases", _MCNEMAR,
                             "descriptive cell; the paired comparison of two models on the same cases "
                             "(medvigil_compare's within-case swap test)"),
    "text_only": PowerFormula(ABOVE_CHANCE, "one", "items with options",
                              "accuracy above chance (fraction; 0.05 = 5 accuracy points)",
                              "one-sided exact test: text-only accuracy above the chance rate"),
    "membership": PowerFormula(AUC, "one", "members and non-members", "AUC above 0.5",
                               "one-sided permutation test of the attack's AUC"),
    "exch_rank": PowerFormula(SPEARMAN, "one", "examples", "Spearman rho (position vs log-likelihood)",
                              "one-sided permutation test of Spearman's rho"),
    "exch": PowerFormula(ONE_SAMPLE_T, "one", "shards", "Cohen's d of the shard differences",
                         "one-sided one-sample t-test of the shard differences"),
    "dataset_inference": PowerFormula(TWO_SAMPLE_T, "one", "members and non-members of half B (the tested half; "
                                      "half A fits the model)", "Cohen's d of the aggregated membership score",
                                      "one-sided Welch t-test of the linear model's scores on half B: members above "
                                      "non-members"),
    "overlap_gap": PowerFormula(TWO_SAMPLE_T, "one", "images (flagged and unflagged)",
                                "Cohen's d of the images' mean scores, flagged against unflagged",
                                "one-sided image-permutation test of the flagged-minus-unflagged gap in mean "
                                "score (the t-test of image means approximates it)"),
    "codec": PowerFormula(AUC, "one", "members and non-members",
                          "AUC above 0.5 (P(a non-member gains more from in-context examples than a member))",
                          "one-sided Mann-Whitney test: members' in-context gain below non-members'"),
}

# Kinds whose test has no closed power formula: their MDE comes from simulating that test under
# a stated generative model (``medexp.detectors.power_simulation``, cached by
# ``medexp.evaluators.simulated_power``; those sit above this pure layer).
BY_SIMULATION = {
    "mink_tail": "a cohort-relabel permutation test of a tail fraction",
    "topk_jaccard": "a cohort-relabel permutation test of the largest top-K overlap (or, with null=hypergeometric, "
                    "hypergeometric tests of the overlaps)",
    "loss": "a cohort-relabel permutation test of the mean loss gap",
    "image_nn": "a beta-binomial test of the flag count against a calibrated rate",
    "memorization": "a permutation test of members' mean M(x) over paired models",
}
# Kinds that test nothing, so have no power and no MDE.
WITHOUT_TEST = {
    "composition_sweep": "a descriptive false-positive sweep of the mink_tail rule over cohort compositions",
}


class NoPowerFormula(LookupError):
    """A detector kind without a closed power formula (simulated or testing nothing), or an unknown kind."""


def power_formula(kind: str) -> PowerFormula:
    """The formula of a detector kind; :class:`NoPowerFormula` with the reason otherwise."""
    if kind in POWER_FORMULAS:
        return POWER_FORMULAS[kind]
    if kind in BY_SIMULATION:
        raise NoPowerFormula(f"detector kind {kind!r} runs {BY_SIMULATION[kind]}: no closed power formula; "
                             "its MDE is by simulation (python -m medexp.power answers it)")
    if kind in WITHOUT_TEST:
        raise NoPowerFormula(f"detector kind {kind!r} is {WITHOUT_TEST[kind]}: it tests nothing (no p-value), "
                             "so it has no power and no minimum detectable effect")
    raise NoPowerFormula(f"unknown detector kind {kind!r}; kinds with a formula: {sorted(POWER_FORMULAS)}, "
                         f"by simulation: {sorted(BY_SIMULATION)}")


def detector_mde(kind: str, n: int, alpha: float, power: float = MDE_POWER, chance: float | None = None,
                 n_negative: int | None = None) -> float:
    """The MDE of a detector kind at a cell's n and alpha, in its formula's effect unit.

    ``n`` is what the formula's ``n_unit`` counts (members for an AUC or a two-sample t-test, whose
    non-members are ``n_negative``). Paired accuracy uses var(D) at :func:`medexp.stats.power.paired_difference_variance`'s
    defaults (accuracy 0.5, correlation 0.5), the assumptions ``python -m medexp.power`` states, so
    a cell's logged MDE is the one that command printed before the run; above-chance tests need
    the cell's ``chance`` rate. NaN where n is below what the formula needs."""
    formula = power_formula(kind)
    smallest = _SMALLEST_N.get(formula.family, 1)
    if n < smallest or (n_negative is not None and n_negative < (smallest if formula.family == TWO_SAMPLE_T else 1)) \
            or (chance is not None and not 0 < chance < 1):
        return math.nan  # too few units (or a certain chance rate) for the formula: a cell never fails for it
    if formula.family == PAIRED_ACCURACY:
        return pw.paired_accuracy_mde(n, alpha, power, pw.paired_difference_variance(), formula.sided)
    if formula.family == ABOVE_CHANCE:
        if chance is None:
            raise ValueError(f"detector kind {kind!r} tests accuracy above chance: its MDE needs the chance rate")
        return pw.above_chance_mde(n, chance, alpha, power, formula.sided)
    if formula.family == AUC:
        if n_negative is None:
            raise ValueError(f"detector kind {kind!r} tests an AUC: its MDE needs the non-members (n_negative)")
        return pw.auc_mde(n, n_negative, alpha, power, formula.sided)
    if formula.family == SPEARMAN:
        return pw.spearman_mde(n, alpha, power, formula.sided)
    if formula.family == ONE_SAMPLE_T:
        return pw.one_sample_t_mde(n, alpha, power, formula.sided)
    if formula.family == TWO_SAMPLE_T:
        if n_negative is None:
            raise ValueError(f"detector kind {kind!r} compares two samples: its MDE needs the non-members (n_negative)")
        return pw.two_sample_t_mde(n, n_negative, alpha, power, formula.sided)
    raise NotImplementedError(f"no MDE for formula family {formula.family!r}")
