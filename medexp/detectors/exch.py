"""Detector ``exch``: canonical-order exchangeability by sharded likelihood comparison.

Oren et al. (2024): if a model never saw a benchmark, every ordering of its examples is equally
likely under the model. The benchmark, rendered as text in the order under test, is cut into
contiguous shards; each shard is scored in that order and in random orders (the score table
``shard, permutation, loglik`` with permutation 0 the order under test), and a one-sided t-test
asks whether the order under test is systematically more likely.
"""

from __future__ import annotations

import pandas as pd

from medexp.config.schemas import ControlKind, ExchConfig
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.stats import shard_exchangeability_test
from medexp.stats.detector_power import ONE_SAMPLE_T, PowerFormula, detector_mde


def exch_detector(shard_scores: pd.DataFrame, cfg, n_examples: int) -> DetectorResult:
    wide = shard_scores.pivot(index="shard", columns="permutation", values="loglik").sort_index()
    canonical = wide[0].to_numpy()
    permuted = wide.drop(columns=0).to_numpy()
    test = shard_exchangeability_test(canonical, permuted)
    table = pd.DataFrame(
        {
            "shard": wide.index.to_numpy(),
            "canonical_loglik": canonical,
            "permuted_mean_loglik": permuted.mean(axis=1),
            "permuted_std_loglik": permuted.std(axis=1, ddof=1),
            "difference": test.shard_differences,
        }
    )
    metrics = {
        "p_value": test.p_value,
        "statistic": test.statistic,
        "mean_difference": test.mean_difference,
        "n_shards": float(len(canonical)),
        "n_permutations": float(permuted.shape[1]),
        "n_examples": float(n_examples),
        "flag": float(test.p_value < cfg.alpha),
        "mde": detector_mde(DECLARATION.power, len(canonical), cfg.alpha),  # Cohen's d of the shard differences, power 0.8
    }
    return DetectorResult(metrics, table, "per_shard", {"shard_differences": _figure(table, test.p_value)})


def _figure(table: pd.DataFrame, p_value: float):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 3.2), layout="constrained")
    axes = figure.subplots(1, 2, width_ratios=[3, 1])
    colors = ["tab:red" if d > 0 else "tab:blue" for d in table["difference"]]
    axes[0].bar(table["shard"], table["difference"], color=colors)
    axes[0].axhline(0, color="black", linewidth=0.8)
    axes[0].set(xlabel="shard", ylabel="d = log p(order) - mean log p(shuffled)",
                title=f"exchangeability: p = {p_value:.3g}")
    axes[1].hist(table["difference"], bins=15, orientation="horizontal", color="gray")
    axes[1].axhline(0, color="black", linewidth=0.8)
    axes[1].set(xlabel="shards")
    return figure


DECLARATION = DetectorDeclaration(
    name="exch",
    schema=ExchConfig,
    evaluator="medexp.evaluators.exchangeability:exch",
    inputs=frozenset({Input.model}),
    controls=SCORING_CONTROLS - {ControlKind.blind_image},
    power=PowerFormula(ONE_SAMPLE_T, "one", "shards", "Cohen's d of the shard differences",
                       "one-sided one-sample t-test of the shard differences"),
    power_count="medexp.evaluators.power_counts:shards",
    docs="docs/detectors.md",
    control_reasons={ControlKind.blind_image: "exch scores the question/answer text alone, so without images it would repeat control=none"},
    report_figures=("exchangeability heatmap",),
)
