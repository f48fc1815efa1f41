"""MedVIGIL comparisons: two models on the same cases, fixed against rotated letters, rankings.

* :func:`paired_difference`: every metric of model A minus model B, with a case-clustered paired
  bootstrap interval (the same resampled cases for both models, seeded by
  :func:`medexp.stats.bootstrap.pair_seed` of the two cells, so the result does not depend on any
  other model) and two p-values: the bootstrap's, and a within-case swap test's
  (:mod:`medexp.stats.paired_swap`), whose level is exact by construction; ``p_value`` is the
  swap test's. On 600 simulated null pairs of 80 cases both rejected near 5% at alpha 0.05
  (swap 4.7%, bootstrap 5.0%; NOTES_medvigil.md).
* :func:`rotation_effect`: the same model answering the same probes with the release's fixed
  letters (gold at A for answer probes, at E for traps and masked regions) and with rotated
  letters; the difference fixed - rotated is the position confound of each metric.
* :func:`letter_preference_test`: whether a model prefers letters when the options' positions
  are random (the rotated arm): chosen letters against the counts a position-blind model would
  give, sum over probes of 1 / n_options for each letter the probe offers.
* :func:`sensitivity_ranking`: how the model ranking by MCS moves under the alternative tier
  weights and Grounding forms (Spearman correlation with the default ranking, top-k overlap,
  leader), from each model's :func:`medexp.detectors.medvigil_metrics.sensitivity_table`.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from medexp.answers.table import Status
from medexp.benchmarks.options import LETTERS
from medexp.detectors.medvigil_metrics import ERRORS_WRONG, case_totals, metric_statistic
from medexp.detectors.medvigil_tables import letter_preference
from medexp.kernel.hashing import derive_seed
from medexp.stats.bootstrap import N_RESAMPLES, paired_cluster_bootstrap
from medexp.stats.paired_swap import paired_swap_test

N_PERMUTATIONS = 2000


def paired_difference(table_a: pd.DataFrame, table_b: pd.DataFrame, seed: int, n_resamples: int = N_RESAMPLES,
                      convention: str = ERRORS_WRONG, confidence: float = 0.95,
                      metrics: Optional[Sequence[str]] = None, n_permutations: int = N_PERMUTATIONS) -> pd.DataFrame:
    """Metric differences A - B on the cases both tables hold (scored tables, see ``scored_table``).

    One row per metric: estimate_a, estimate_b (on the shared cases), difference, its
    case-clustered paired bootstrap interval and bootstrap p-value (``p_value_bootstrap``), the
    p-value of the within-case swap test (``p_value``, the test to use: its level is exact), and
    how many cases were shared or left out. Both draw from ``seed`` (use ``pair_seed``).
    """
    cases_a, totals_a = case_totals(table_a, convention)
    cases_b, totals_b = case_totals(table_b, convention)
    shared = sorted(set(cases_a) & set(cases_b))
    if not shared:
        raise ValueError("the two response tables share no case: a paired comparison needs the same cases")
    columns = sorted(set(totals_a.columns) | set(totals_b.columns))
    matrix_a = totals_a.reindex(index=shared, columns=columns, fill_value=0.0).to_numpy()
    matrix_b = totals_b.reindex(index=shared, columns=columns, fill_value=0.0).to_numpy()
    statistic = metric_statistic(columns)
    results = paired_cluster_bootstrap(matrix_a, matrix_b, statistic, n_resamples, seed, confidence)
    swaps = paired_swap_test(matrix_a, matrix_b, statistic, n_permutations, derive_seed(seed, "swap"))
    rows = []
    for name, value in results.items():
        if metrics is not None and name not in metrics:
            continue
        rows.append({"metric": name, "estimate_a": value.estimate_a, "estimate_b": value.estimate_b,
                     "difference": value.estimate, "ci_low": value.low, "ci_high": value.high,
                     "p_value": swaps[name].p_value, "p_value_bootstrap": value.p_value,
                     "n_valid": value.n_valid, "n_resamples": value.n_resamples,
                     "n_cases": len(shared), "n_cases_only_a": len(set(cases_a) - set(shared)),
                     "n_cases_only_b": len(set(cases_b) - set(shared))})
    return pd.DataFrame(rows)


def rotation_effect(fixed: pd.DataFrame, rotated: pd.DataFrame, seed: int, n_resamples: int = N_RESAMPLES,
                    convention: str = ERRORS_WRONG) -> dict[str, pd.DataFrame]:
    """Each metric with fixed and with rotated letters, and the position confound fixed - rotated.

    Returns ``metrics`` (metric, fixed, rotated, position_confound, its interval and p-value) and
    ``letters`` (each arm's letter preference, see ``letter_preference``).
    """
    paired = paired_difference(fixed, rotated, seed, n_resamples, convention)
    metrics = paired.rename(columns={"estimate_a": "fixed", "estimate_b": "rotated",
                                     "difference": "position_confound"})
    letters = pd.concat([letter_preference(fixed).assign(arm="fixed"),
                         letter_preference(rotated).assign(arm="rotated")], ignore_index=True)
    return {"metrics": metrics, "letters": letters}


def letter_preference_test(table: pd.DataFrame) -> dict[str, float]:
    """Chi-square test that the chosen letters are what a position-blind model would choose.

    Valid when the options' order is random (the rotated arm): a model that ignores positions
    then picks each offered letter of a probe with probability 1 / n_options whatever it
    believes. Under the fixed arm the gold's letter is tied to the kind, so use it only there.
    Over ``ok`` replies of probes with options.
    """
    ok = table[(table["status"] == Status.ok.value) & table["options"].map(lambda o: isinstance(o, tuple))]
    if ok.empty:
        return {"chi2": math.nan, "p_value": math.nan, "dof": 0.0, "n": 0.0}
    sizes = ok["options"].map(len).to_numpy()
    width = int(sizes.max())
    expected = np.array([np.sum((sizes > index) / sizes) for index in range(width)])
    observed = np.array([(ok["choice"] == LETTERS[index]).sum() for index in range(width)], dtype=float)
    result = stats.chisquare(observed, expected)
    return {"chi2": float(result.statistic), "p_value": float(result.pvalue), "dof": float(width - 1),
            "n": float(len(ok))}


def sensitivity_ranking(sensitivity: Mapping[str, pd.DataFrame], top_k: int = 5) -> pd.DataFrame:
    """Per variant: Spearman correlation of the models' MCS with the default, top-k overlap, leader.

    ``sensitivity`` maps a model name to its ``sensitivity_table`` (one convention). Models whose
    MCS is undefined under a variant are left out of that variant's comparison.
    """
    frame = pd.concat([table.assign(model=model) for model, table in sensitivity.items()], ignore_index=True)
    wide = frame.pivot_table(index="model", columns="variant", values="mcs", aggfunc="first")
    default_variant = frame.loc[frame["default"], "variant"].iloc[0]
    default = wide[default_variant].dropna()
    default_top = set(default.sort_values(ascending=False).index[:top_k])
    rows = []
    for variant in frame["variant"].drop_duplicates():
        scores = wide[variant].dropna()
        common = sorted(set(scores.index) & set(default.index))
        rho = stats.spearmanr(default[common], scores[common]).statistic if len(common) > 2 else math.nan
        ranked = scores.sort_values(ascending=False)
        rows.append({"variant": variant, "spearman": float(rho), "n_models": len(common),
                     f"top{top_k}_overlap": len(set(ranked.index[:top_k]) & default_top),
                     "leader": ranked.index[0] if len(ranked) else None})
    return pd.DataFrame(rows)
