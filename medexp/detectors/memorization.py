"""Detector ``memorization``: which canaries a fine-tuned model learned by heart, and which
classes are most at risk (Feldman & Zhang's differential influence, as the audit uses it).

Per example and pair, M(x) = L_ind(x) - L_cand(x); M(x) is averaged over the pairs (seed
replicates) and over each class's canaries. The candidate also saw more data than the
independent model, which can lower its loss on every example, so M(x) on the non-members is the
reference: the test is that the members' mean M(x) exceeds the non-members' (a one-sided
permutation test of the membership labels, unit: example). Reported besides:

* per class: mean M(x) over its canaries with a percentile bootstrap interval (unit: canary),
  the non-members' mean, the class frequency, the risk tier (LOW <= 0.1 < MODERATE <= 0.3 < HIGH,
  configurable) and the rank;
* rarity: the image-level Spearman between each canary's class frequency and its M(x) (negative:
  rare classes memorised more) with SciPy's p-value, per pair too, and a sign test of the pairs'
  correlations (with one pair it is uninformative: p = 1);
* atypicality, when given: the Spearman between a canary's cosine distance to its class centroid
  and M(x), raw and within class (both axes minus their class means).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from medexp.config.schemas import ControlKind, MemorizationConfig
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input, Simulated
from medexp.detectors.differential import PairedLosses, metric_key
from medexp.kernel.hashing import derive_seed
from medexp.stats.summaries import mean_ci, mean_difference_test, sign_test, spearman, within_group

TIERS = ("LOW", "MODERATE", "HIGH")


def memorization_detector(losses: PairedLosses, cfg, seed: int, atypicality: np.ndarray | None = None) -> DetectorResult:
    """``atypicality``: per example (aligned with ``losses``; NaN for non-members) or None."""
    low, high = _tiers(cfg.risk_tiers)
    m_pairs = losses.m
    m = m_pairs.mean(axis=0)
    members = losses.member
    test = mean_difference_test(m[members], m[~members], int(cfg.n_permutations), derive_seed(seed, "memorization"))
    classes = _class_table(losses, m, cfg, seed, (low, high))
    worst = classes.iloc[0]
    metrics = {
        "p_value": test.p_value,
        "statistic": test.statistic,
        "m_mean_members": float(m[members].mean()),
        "m_mean_nonmembers": float(m[~members].mean()),
        "null_mean": test.null_mean,
        "null_std": test.null_std,
        "worst_class_m": float(worst["m_mean"]),
        "worst_class_frequency": float(worst["class_frequency"]),
        "worst_class_n": float(worst["n_canaries"]),
        "n_classes": float(len(classes)),
        **{f"n_classes_{tier.lower()}": float((classes["risk_tier"] == tier).sum()) for tier in TIERS},
        **{f"class_m.{metric_key(row.cls)}": float(row.m_mean) for row in classes.itertuples()},
        **_rarity(losses, m_pairs),
        "n_pairs": float(losses.n_pairs),
        "n_members": float(members.sum()),
        "n_nonmembers": float((~members).sum()),
        "n_permutations": float(test.n_permutations),
        "n_examples": float(len(m)),
        "flag": float(test.p_value < cfg.alpha),
    }
    table = _example_table(losses, m_pairs, m)
    if atypicality is not None:
        atypicality = np.asarray(atypicality, dtype=np.float64)
        table["atypicality"] = atypicality
        metrics.update(_atypicality(atypicality[members], m[members], losses.classes[members]))
    figures = {"memorization_per_class": _class_figure(classes, cfg), "memorization_vs_frequency": _scatter(losses, m)}
    return DetectorResult(metrics, classes.rename(columns={"cls": "class"}), "per_class", figures,
                          extra_tables={"per_example": table})


def _tiers(bounds) -> tuple[float, float]:
    values = [float(value) for value in bounds]
    if len(values) != 2 or values[0] > values[1]:
        raise ValueError(f"detector.risk_tiers must be two increasing bounds [low, high], got {values}")
    return values[0], values[1]


def tier(value: float, low: float, high: float) -> str:
    return TIERS[0] if value <= low else TIERS[1] if value <= high else TIERS[2]


def _class_table(losses: PairedLosses, m: np.ndarray, cfg, seed: int, bounds: tuple[float, float]) -> pd.DataFrame:
    rows = []
    members = losses.member
    for cls in sorted(set(losses.classes[members])):
        in_class = losses.classes == cls
        values = m[members & in_class]
        interval = mean_ci(values, int(cfg.n_bootstrap), float(cfg.ci_level), derive_seed(seed, "class", cls))
        outside = m[~members & in_class]
        rows.append({
            "cls": cls,
            "class_frequency": float(losses.class_frequency[in_class][0]),
            "n_canaries": int(values.size),
            "m_mean": interval.mean,
            "m_ci_low": interval.low,
            "m_ci_high": interval.high,
            "n_nonmembers": int(outside.size),
            "m_mean_nonmembers": float(outside.mean()) if outside.size else np.nan,
            "risk_tier": tier(interval.mean, *bounds),
        })
    table = pd.DataFrame(rows).sort_values(["m_mean", "cls"], ascending=[False, True], kind="stable")
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    table["ci_level"] = float(cfg.ci_level)
    table["ci_unit"] = "canary (percentile bootstrap over the class's canaries)"
    return table.reset_index(drop=True)


def _rarity(losses: PairedLosses, m_pairs: np.ndarray) -> dict[str, float]:
    members = losses.member
    frequency = losses.class_frequency[members]
    overall = spearman(frequency, m_pairs.mean(axis=0)[members])
    per_pair = [spearman(frequency, row[members]).rho for row in m_pairs]
    finite = [rho for rho in per_pair if np.isfinite(rho)]
    signs = sign_test(finite)
    return {
        "rarity_spearman_rho": overall.rho,
        "rarity_spearman_p": overall.p_value,
        "rarity_rho_pair_mean": float(np.mean(finite)) if finite else np.nan,
        "rarity_rho_pair_sd": float(np.std(finite, ddof=1)) if len(finite) > 1 else np.nan,
        "rarity_sign_test_p": signs.p_value,
        "rarity_n_negative_pairs": float(signs.n_negative),
    }


def _atypicality(atypicality: np.ndarray, m: np.ndarray, classes: np.ndarray) -> dict[str, float]:
    if np.any(~np.isfinite(atypicality)):
        raise ValueError("atypicality is missing (NaN) for some canaries")
    raw = spearman(atypicality, m)
    residual = spearman(within_group(atypicality, classes), within_group(m, classes))
    return {"atypicality_spearman_rho": raw.rho, "atypicality_spearman_p": raw.p_value,
            "atypicality_within_class_rho": residual.rho, "atypicality_within_class_p": residual.p_value}


def _example_table(losses: PairedLosses, m_pairs: np.ndarray, m: np.ndarray) -> pd.DataFrame:
    table = pd.DataFrame({
        "example_id": losses.example_ids,
        "member": losses.member,
        "class": losses.classes,
        "class_frequency": losses.class_frequency,
        "m": m,
        "candidate_nll": losses.candidate_nll.mean(axis=0),
        "independent_nll": losses.independent_nll.mean(axis=0),
    })
    for index, row in enumerate(m_pairs):
        table[f"m_pair_{index}"] = row
    return table


def _class_figure(classes: pd.DataFrame, cfg):
    from matplotlib.figure import Figure

    colours = {"LOW": "tab:green", "MODERATE": "tab:orange", "HIGH": "tab:red"}
    figure = Figure(figsize=(max(5.0, 0.6 * len(classes) + 2), 3.6), layout="constrained")
    axes = figure.subplots()
    means = classes["m_mean"].to_numpy()
    errors = np.vstack([means - classes["m_ci_low"].to_numpy(), classes["m_ci_high"].to_numpy() - means])
    axes.bar(classes["cls"].astype(str), means, color=[colours[t] for t in classes["risk_tier"]],
             yerr=np.nan_to_num(errors), capsize=3)
    axes.plot(classes["cls"].astype(str), classes["m_mean_nonmembers"], "k_", markersize=14, label="non-members")
    axes.axhline(0, color="black", linewidth=0.8)
    axes.set(ylabel="mean M(x) = L_ind - L_cand", title=f"per-class memorization ({cfg.ci_level:.0%} CI over canaries)")
    axes.tick_params(axis="x", rotation=30, labelsize=8)
    axes.legend(fontsize=7)
    return figure


def _scatter(losses: PairedLosses, m: np.ndarray):
    from matplotlib.figure import Figure

    members = losses.member
    figure = Figure(figsize=(5, 3.6), layout="constrained")
    axes = figure.subplots()
    axes.scatter(losses.class_frequency[members], m[members], s=6, alpha=0.5, label="canaries")
    axes.scatter(losses.class_frequency[~members], m[~members], s=6, alpha=0.3, color="gray", label="non-members")
    axes.set(xscale="log", xlabel="class frequency", ylabel="M(x)", title="memorization against class frequency")
    axes.axhline(0, color="black", linewidth=0.8)
    axes.legend(fontsize=7)
    return figure


DECLARATION = DetectorDeclaration(
    name="memorization",
    schema=MemorizationConfig,
    evaluator="medexp.evaluators.memorization:memorization",
    inputs=frozenset({Input.scores, Input.trained_pairs, Input.nonmembers}),
    controls=SCORING_CONTROLS - {ControlKind.external_baseline},
    power=Simulated("a permutation test of members' mean M(x) over paired models"),
    power_count="medexp.evaluators.memorization:memorization_sizes",
    docs="docs/memorization.md#detectormemorization",
    control_reasons={ControlKind.external_baseline: (
        "a baseline model has no independent counterpart trained without the canaries; name further pairs in "
        "detector.pairs or references in detector.reference_models")},
)
