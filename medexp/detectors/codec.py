"""Detector ``codec`` (CoDeC, arXiv 2510.27055: contamination detection by in-context contrast).

Each item is scored twice: alone, and after ``n_context`` other items of its own split written as
"Question: ... Answer: ...". On data it has not seen a model gains confidence from in-context
examples of the same dataset (they show the format and the answer style); on a dataset it
memorised it already knows the items, so it gains less, or loses confidence as the context
displaces the memorised continuation. Per item, gain = mean answer log-probability in context
minus alone; the members' (the audited split) gains are compared with the non-members' (a
held-out split of the same benchmark, given contexts from their own split).

The test is one-sided Mann-Whitney (non-members' gains above members'), not Welch's t: a gain is
a difference of two mean log-probabilities, bounded above where an answer is already near
certain and heavy-tailed below (an item whose answer the context displaces can lose several nats),
so means and variances are driven by a few items; ranks are not, and the statistic
U / (n1 n2) is an AUC (P(a non-member gains more than a member)), whose power formula applies.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from medexp.config.schemas import CodecConfig, ControlKind
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.stats.detector_power import AUC, PowerFormula, detector_mde
from medexp.stats.two_sample import rank_greater


def in_context_gain(alone: pd.DataFrame, in_context: pd.DataFrame) -> np.ndarray:
    """Per example, mean answer log p with the context minus without (score tables of the same examples, in order)."""
    if list(alone["example_id"]) != list(in_context["example_id"]):
        raise ValueError("codec: the scores alone and in context must cover the same examples in the same order")
    return in_context["mean_logprob"].to_numpy(dtype=np.float64) - alone["mean_logprob"].to_numpy(dtype=np.float64)


def codec_detector(members_alone: pd.DataFrame, members_in_context: pd.DataFrame, nonmembers_alone: pd.DataFrame,
                   nonmembers_in_context: pd.DataFrame, cfg) -> DetectorResult:
    """p: one-sided Mann-Whitney test that members gain less from in-context examples than non-members."""
    member_gain = in_context_gain(members_alone, members_in_context)
    nonmember_gain = in_context_gain(nonmembers_alone, nonmembers_in_context)
    test = rank_greater(nonmember_gain, member_gain)
    metrics = {
        "p_value": test.p_value,
        "statistic": test.auc,
        "flag": float(test.p_value < cfg.alpha),
        "n_examples": float(member_gain.size + nonmember_gain.size),
        "n_members": float(member_gain.size),
        "n_nonmembers": float(nonmember_gain.size),
        "gain_mean_members": float(member_gain.mean()),
        "gain_mean_nonmembers": float(nonmember_gain.mean()),
        "gain_median_members": float(np.median(member_gain)),
        "gain_median_nonmembers": float(np.median(nonmember_gain)),
        # the share of items whose confidence drops with the context (CoDeC's per-dataset score)
        "drop_share_members": float(np.mean(member_gain < 0)),
        "drop_share_nonmembers": float(np.mean(nonmember_gain < 0)),
        "mde": detector_mde(DECLARATION.power, member_gain.size, float(cfg.alpha), n_negative=nonmember_gain.size),
    }
    table = pd.DataFrame({
        "example_id": [*members_alone["example_id"], *nonmembers_alone["example_id"]],
        "member": np.r_[np.ones(member_gain.size, bool), np.zeros(nonmember_gain.size, bool)],
        "logprob_alone": np.r_[members_alone["mean_logprob"], nonmembers_alone["mean_logprob"]],
        "logprob_in_context": np.r_[members_in_context["mean_logprob"], nonmembers_in_context["mean_logprob"]],
        "gain": np.r_[member_gain, nonmember_gain],
    })
    return DetectorResult(metrics=metrics, table=table)


DECLARATION = DetectorDeclaration(
    name="codec",
    schema=CodecConfig,
    evaluator="medexp.evaluators.dataset_tests:codec",
    inputs=frozenset({Input.model, Input.nonmembers}),
    controls=SCORING_CONTROLS,
    power=PowerFormula(AUC, "one", "members and non-members",
                       "AUC above 0.5 (P(a non-member gains more from in-context examples than a member))",
                       "one-sided Mann-Whitney test: members' in-context gain below non-members'"),
    power_count="medexp.evaluators.power_counts:members_and_nonmembers",
    docs="docs/detectors.md#dataset-level-membership-tests-dataset_inference-codec",
)
