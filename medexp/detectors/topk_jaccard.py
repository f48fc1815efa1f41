"""Detector ``topk_jaccard``: cross-model overlap of the top-K examples (Detector 4).

Each cohort model ranks the examples by its Min-K%++ score m_i (``rank_by: score``) or by its
Delta_i against the median of the other models (``rank_by: delta``) and keeps its top K.
For every pair of models: |A n B|, Jaccard |A n B| / |A u B|, the chance expectation K^2/n of
two independent random K-sets, lift = |A n B| / (K^2/n), and the hypergeometric tail
P[X >= |A n B|], X ~ Hypergeometric(n, K, K), which is the exact null distribution of the
intersection when the two rankings are independent.

p-value (``null``). ``relabel`` (the default): a cohort-relabel permutation test of the target's
largest overlap with any reference (:func:`medexp.stats.cohort.cohort_relabel_overlap_test`): is
it larger than a cohort member's in the target's place? ``hypergeometric``: the smallest
hypergeometric p of the target's pairs, Bonferroni-corrected over those pairs, the audit's test;
it takes every top-K set for a uniformly random K-set, which independently trained clean models
are not: they share the examples on which the cohort's scores spread and, ranked by delta, the
medians they are measured against, and the demo's clean replicates were flagged at several times
alpha under it (docs/atlas.md). Both are logged (``p_value_hypergeometric``, ``p_value_relabel``).

A pair is flagged when its overlap is at least ``flag_lift`` times chance (the audit's "order of
magnitude") and the cell's p-value is below alpha, so a single shared example in a large
benchmark, which already gives a lift above 10, does not flag by itself. Shared easiness is not
shared exposure: models of similar calibration agree on which examples are easy (the audit's
BLIP-2 falsification), and ranking by ``delta`` removes the part of easiness the whole cohort
shares.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict

import numpy as np
import pandas as pd

from medexp.config.schemas import ControlKind, OverlapNull, RankBy, TopKJaccardConfig
from medexp.detectors.base import DetectorResult
from medexp.detectors.cohort import CohortScores
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input, Simulated
from medexp.detectors.mink_tail import minkpp_matrix
from medexp.stats.cohort import cohort_relabel_overlap_test, deltas_vs_cohort, top_k_indices, top_k_overlap
from medexp.stats.multiple_testing import adjust_pvalues


def topk_jaccard_detector(cohort: CohortScores, cfg, seed: int) -> DetectorResult:
    """Pairwise top-K overlap over the cohort; the cell's p-value comes from the target's pairs."""
    rank_by = RankBy(cfg.rank_by)
    cohort.require_references(2 if rank_by is RankBy.delta else 1, f"topk_jaccard (rank_by={rank_by.value})")
    scores = minkpp_matrix(cohort, cfg.k_percent)
    models = cohort.models
    n_examples = scores.shape[0]
    tops = ranked_tops(scores, rank_by, cfg.top_k)
    rows = []
    for first, second in itertools.combinations(range(len(models)), 2):
        overlap = top_k_overlap(tops[first], tops[second], n_examples)
        rows.append({"model_a": models[first], "model_b": models[second], "involves_target": first == 0,
                     "k": cfg.top_k, "n": n_examples, **asdict(overlap)})
    table = pd.DataFrame(rows)
    target_pairs = table[table["involves_target"]]
    hypergeometric = target_p_value(target_pairs["p_value"].to_numpy())
    relabel = cohort_relabel_overlap_test(scores, cfg.top_k, rank_by is RankBy.delta, cfg.n_permutations, seed)
    p_value = relabel.p_value if OverlapNull(cfg.null) is OverlapNull.relabel else hypergeometric
    table["flag"] = table["involves_target"] & (table["lift"] >= cfg.flag_lift) & (p_value < cfg.alpha)
    metrics = {
        "p_value": p_value,
        "statistic": float(target_pairs["jaccard"].max()),
        "max_lift": float(target_pairs["lift"].max()),
        "max_intersection": float(target_pairs["intersection"].max()),
        "expected_intersection": float(cfg.top_k**2 / n_examples),
        "min_pair_p_value": float(target_pairs["p_value"].min()),
        "p_value_hypergeometric": hypergeometric,
        "p_value_relabel": relabel.p_value,
        "n_permutations": float(relabel.n_permutations),
        "null_mean_max_intersection": relabel.null_mean,
        "n_pairs_flagged": float(table["flag"].sum()),
        "n_models": float(len(models)),
        "top_k": float(cfg.top_k),
        "n_examples": float(n_examples),
        "flag": float(table["flag"].any()),
    }
    return DetectorResult(metrics, table, "per_pair", {"topk_overlap": _figure(table, models, cfg, rank_by)})


def ranked_tops(scores: np.ndarray, rank_by: RankBy, top_k: int) -> list[np.ndarray]:
    """Each model's top-K examples of an (examples x models) Min-K%++ matrix, by score or by Delta."""
    if rank_by is RankBy.delta:
        scores = deltas_vs_cohort(scores)
    return [top_k_indices(scores[:, column], top_k) for column in range(scores.shape[1])]


def target_p_value(target_pair_p_values: np.ndarray) -> float:
    """The audit's p-value (null=hypergeometric): the smallest hypergeometric p of the target's pairs,
    Bonferroni-corrected."""
    return float(adjust_pvalues(target_pair_p_values, "bonferroni").min())


def _figure(table: pd.DataFrame, models: list[str], cfg, rank_by: RankBy):
    from matplotlib.figure import Figure

    size = len(models)
    jaccard = np.eye(size)
    notes = [["" for _ in range(size)] for _ in range(size)]
    index = {model: position for position, model in enumerate(models)}
    for row in table.itertuples():
        a, b = index[row.model_a], index[row.model_b]
        jaccard[a, b] = jaccard[b, a] = row.jaccard
        notes[a][b] = notes[b][a] = f"{row.intersection}/{row.k}\nx{row.lift:.1f}"
    figure = Figure(figsize=(1.3 * size + 2.5, 1.1 * size + 1.5), layout="constrained")
    axes = figure.subplots()
    image = axes.imshow(jaccard, vmin=0, vmax=1, cmap="viridis")
    for a in range(size):
        for b in range(size):
            if notes[a][b]:
                axes.text(b, a, notes[a][b], ha="center", va="center", fontsize=8,
                          color="black" if jaccard[a, b] > 0.5 else "white")
    axes.set_xticks(range(size), models, rotation=30, ha="right", fontsize=8)
    axes.set_yticks(range(size), models, fontsize=8)
    axes.set_title(f"top-{cfg.top_k} Jaccard by {rank_by.value} (cell: intersection/K, lift over K^2/n)", fontsize=9)
    figure.colorbar(image, ax=axes, label="Jaccard")
    return figure


DECLARATION = DetectorDeclaration(
    name="topk_jaccard",
    schema=TopKJaccardConfig,
    evaluator="medexp.evaluators.cohort:topk_jaccard",
    inputs=frozenset({Input.token_scores, Input.references}),
    controls=SCORING_CONTROLS | {ControlKind.synthetic},
    power=Simulated("a cohort-relabel permutation test of the largest top-K overlap (or, with null=hypergeometric, "
                    "hypergeometric tests of the overlaps)"),
    power_count="medexp.evaluators.cohort:cohort_sizes",
    docs="docs/detectors.md#cohort-detectors-mink_tail-topk_jaccard-loss",
    report_tables={"per_pair": ("detector.top_k", "per_pair.parquet")},
)
