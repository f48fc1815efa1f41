"""Detector ``loss``: the loss attack, per-example mean negative log-likelihood of the answer.

A model that trained on an example tends to give its gold answer a low loss. Per example the
loss is the mean NLL per answer token (``-mean_logprob``), and its gap to the cohort is
median over the other models of their NLL minus the target's NLL (positive: the target finds
the example easier than the cohort does). Examples are ranked by the target's own loss
(``rank_by: score``, the classic loss attack) or by the gap (``rank_by: delta``); rank 1 is
the most suspect example. The ranking is the result table.

p-value: a cohort-relabel permutation test of the mean gap (nats per token). Null: on every
example the cohort's models are exchangeable, so the model in the target's place is a
uniformly random cohort member, drawn independently per example. A model that is simply
better on the whole benchmark also has a positive gap, so this test, like every
cohort-relative test, needs reference models of comparable ability and an external baseline
before a small p is read as contamination.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from medexp.config.schemas import ControlKind, LossConfig, RankBy
from medexp.detectors.base import DetectorResult
from medexp.detectors.cohort import CohortScores, model_colors, relabel_metrics
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input, Simulated
from medexp.stats.cohort import cohort_relabel_test, deltas_vs_cohort

_TEXT_COLUMNS = ("question", "answer")


def loss_detector(cohort: CohortScores, cfg, seed: int, meta: pd.DataFrame | None = None) -> DetectorResult:
    """Loss ranking of the target and its gap to the cohort; ``meta`` adds question and answer."""
    if cfg.top_n < 1:
        raise ValueError(f"detector.top_n must be >= 1, got {cfg.top_n}")
    cohort.require_references(2, "loss")
    nll = cohort.matrix(lambda table: -table["mean_logprob"].to_numpy(dtype=np.float64), "mean NLL")
    # deltas of -NLL: (-NLL_j) - median(-NLL_others) = median(NLL_others) - NLL_j, the gap.
    gaps = deltas_vs_cohort(-nll)
    test = cohort_relabel_test(gaps, 0, cfg.n_permutations, seed)
    table = _ranking(cohort, nll, gaps, RankBy(cfg.rank_by), meta)
    metrics = {
        "p_value": test.p_value,
        "statistic": test.statistic,
        "target_mean_nll": float(nll[:, 0].mean()),
        "cohort_median_mean_nll": float(np.median(nll[:, 1:], axis=1).mean()),
        "frac_lowest_loss": float(np.mean(nll[:, 0] < nll[:, 1:].min(axis=1))),
        **relabel_metrics(test, nll.shape),
        "flag": float(test.p_value < cfg.alpha),
    }
    return DetectorResult(metrics, table, "loss_ranking", {"loss_ranking": _figure(nll, table, cohort.models, cfg)})


def _ranking(cohort: CohortScores, nll, gaps, rank_by: RankBy, meta) -> pd.DataFrame:
    target_table = cohort.tables[cohort.target].set_index("example_id").loc[cohort.example_ids].reset_index()
    table = pd.DataFrame({
        "example_id": cohort.example_ids,
        "position": target_table["position"].to_numpy(),
        "n_answer_tokens": target_table["n_answer_tokens"].to_numpy(),
        "nll": nll[:, 0],
        "cohort_median_nll": np.median(nll[:, 1:], axis=1),
        "nll_gap": gaps[:, 0],
    })
    # Lowest loss first, or largest gap first; ties keep the benchmark order (stable sort).
    key = table["nll"] if rank_by is RankBy.score else -table["nll_gap"]
    table = table.iloc[np.argsort(key.to_numpy(), kind="stable")].reset_index(drop=True)
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    if meta is not None:
        text = [column for column in _TEXT_COLUMNS if column in meta.columns]
        table = table.merge(meta[["example_id", *text]], on="example_id", how="left")
    return table


def _figure(nll: np.ndarray, table: pd.DataFrame, models: list[str], cfg):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 3.6), layout="constrained")
    axes = figure.subplots(1, 2)
    for column, (model, color) in enumerate(zip(models, model_colors(len(models)))):
        axes[0].plot(np.sort(nll[:, column]), label=model, color=color, linewidth=2.0 if column == 0 else 1.0)
    axes[0].set(xlabel="examples, lowest loss first", ylabel="mean NLL per answer token (nats)",
                title=f"loss ranking (target {models[0]} in red)")
    axes[0].legend(fontsize=7)
    top = table.head(cfg.top_n)
    axes[1].barh(top["example_id"].astype(str), top["nll_gap"], color="tab:red")
    axes[1].axvline(0, color="black", linewidth=0.8)
    axes[1].invert_yaxis()
    axes[1].tick_params(axis="y", labelsize=6)
    axes[1].set(xlabel="cohort median NLL - target NLL (nats/token)", title=f"top {len(top)} by {RankBy(cfg.rank_by).value}")
    return figure


DECLARATION = DetectorDeclaration(
    name="loss",
    schema=LossConfig,
    evaluator="medexp.evaluators.cohort:loss",
    inputs=frozenset({Input.scores, Input.references}),
    controls=SCORING_CONTROLS | {ControlKind.synthetic},
    power=Simulated("a cohort-relabel permutation test of the mean loss gap"),
    power_count="medexp.evaluators.cohort:cohort_sizes",
    docs="docs/detectors.md#cohort-detectors-mink_tail-topk_jaccard-loss",
)
