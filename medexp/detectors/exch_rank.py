"""Detector ``exch_rank``: permutation test of earliness vs per-example log-likelihood.

The cheap scalar variant of the exchangeability test: Spearman's correlation between how early
an example comes in the order under test and its own log-likelihood, against random orders.
It reacts to any likelihood covariate the order carries (answer length, grouping by source),
which is what the ordering ablation (control=order_hash) checks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from medexp.config.schemas import ControlKind, ExchRankConfig
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.stats import rank_exchangeability
from medexp.stats.detector_power import SPEARMAN, PowerFormula, detector_mde


def exch_rank_detector(example_scores: pd.DataFrame, cfg, seed: int) -> DetectorResult:
    if cfg.score not in example_scores.columns:
        raise ValueError(f"detector.score={cfg.score!r} is not a score column; choose from {list(example_scores.columns)}")
    loglik = example_scores[cfg.score].to_numpy(dtype=np.float64)
    test = rank_exchangeability(loglik, n_permutations=cfg.n_permutations, seed=seed)
    metrics = {
        "p_value": test.p_value,
        "statistic": test.statistic,
        "n_exceed": float(test.n_exceed),
        "n_permutations": float(test.n_permutations),
        "null_mean": test.null_mean,
        "null_std": test.null_std,
        "permutation_seed": float(seed),
        "n_examples": float(loglik.size),
        "flag": float(test.p_value < cfg.alpha),
        "mde": detector_mde(DECLARATION.power, loglik.size, cfg.alpha),  # Spearman's rho detected with power 0.8
    }
    table = example_scores[["example_id", "position", "n_answer_tokens", "sum_logprob", "mean_logprob"]].copy()
    table["order_index"] = np.arange(len(table))
    return DetectorResult(metrics, table, "per_example", {"loglik_by_order": _figure(table, cfg.score, test)})


def _figure(table: pd.DataFrame, score: str, test):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 3.2), layout="constrained")
    axes = figure.subplots()
    axes.scatter(table["order_index"], table[score], s=6, alpha=0.5)
    axes.set(xlabel="position in the order under test", ylabel=score,
             title=f"Spearman(earliness, {score}) = {test.statistic:.3f}, p = {test.p_value:.3g}")
    return figure


DECLARATION = DetectorDeclaration(
    name="exch_rank",
    schema=ExchRankConfig,
    evaluator="medexp.evaluators.exchangeability:exch_rank",
    inputs=frozenset({Input.scores}),
    controls=SCORING_CONTROLS,
    power=PowerFormula(SPEARMAN, "one", "examples", "Spearman rho (position vs log-likelihood)",
                       "one-sided permutation test of Spearman's rho"),
    power_count="medexp.evaluators.power_counts:examples",
    docs="docs/detectors.md",
    report_figures=("exchangeability heatmap",),
)
