"""Detector ``dataset_inference`` (Maini et al., 2024, "LLM Dataset Inference"): did the model
train on this split as a whole?

Single-example membership attacks are weak; their signals add up over a dataset. Per example,
several membership features from the teacher-forced scores (higher: more member-like): the
answer's mean token log-probability, Min-K% of its token log-probs, Min-K%++ of its z values and
the zlib ratio (log p over the answer's compressed length). Members (the audited split) and
non-members (a held-out split of the same distribution) are each cut at random into halves A and
B; a logistic regression on standardised features learns on half A to tell members from
non-members; it scores half B, and a one-sided Welch t-test asks whether the members' scores
exceed the non-members'. Fitting and testing on disjoint halves keeps the test valid: under the
null (the model saw neither split) the half-B scores of both groups share one distribution
whatever the fit learnt, so p is uniform.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from medexp.config.schemas import ControlKind, DatasetInferenceConfig, MembershipFeature
from medexp.detectors.base import DetectorResult
from medexp.detectors.cohort import min_k_scores
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.kernel.hashing import derive_seed
from medexp.stats.detector_power import TWO_SAMPLE_T, PowerFormula, detector_mde
from medexp.stats.two_sample import rank_greater, welch_greater


def membership_features(table: pd.DataFrame, features, k_percent: float) -> np.ndarray:
    """(examples, features) of a score table with an ``answer`` column, each higher for "member"."""
    columns = []
    for feature in map(MembershipFeature, features):
        if feature is MembershipFeature.mean_logprob:
            columns.append(table["mean_logprob"].to_numpy(dtype=np.float64))
        elif feature is MembershipFeature.min_k:
            columns.append(min_k_scores(table["token_logprobs"], k_percent))
        elif feature is MembershipFeature.min_k_pp:
            columns.append(min_k_scores(table["token_minkpp_z"], k_percent))
        else:
            compressed = np.array([len(zlib.compress(str(answer).encode("utf-8"))) for answer in table["answer"]],
                                  dtype=np.float64)
            columns.append(table["sum_logprob"].to_numpy(dtype=np.float64) / compressed)
    return np.column_stack(columns)


def halves(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Indices of half A (floor(n/2), where the model is fit) and half B (the rest, where it is tested)."""
    order = rng.permutation(n)
    return order[: n // 2], order[n // 2 :]


def scored_half_size(n: int) -> int:
    """How many of n examples land in half B, the half the test reads."""
    return n - n // 2


def dataset_inference_detector(members: pd.DataFrame, nonmembers: pd.DataFrame, cfg, seed: int) -> DetectorResult:
    """``members`` and ``nonmembers``: score tables (medexp.scoring.example_scores) with the gold
    ``answer`` added. p: one-sided Welch t-test of half B's aggregated scores, members above."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    if min(len(members), len(nonmembers)) < 4:
        raise ValueError(f"dataset_inference needs at least 4 members and 4 non-members (two per half), got "
                         f"{len(members)} and {len(nonmembers)}")
    names = [MembershipFeature(feature).value for feature in cfg.features]
    k_percent = float(cfg.k_percent)
    x_members = membership_features(members, names, k_percent)
    x_nonmembers = membership_features(nonmembers, names, k_percent)
    rng = np.random.default_rng(derive_seed(seed, "dataset_inference", "halves"))
    a_members, b_members = halves(len(members), rng)
    a_nonmembers, b_nonmembers = halves(len(nonmembers), rng)

    x_a = np.vstack([x_members[a_members], x_nonmembers[a_nonmembers]])
    y_a = np.r_[np.ones(a_members.size), np.zeros(a_nonmembers.size)]
    scaler = StandardScaler().fit(x_a)
    # Newton steps with a Cholesky solve: exact in a few iterations for a handful of features, where
    # the default L-BFGS takes ten times longer on many examples
    model = LogisticRegression(C=float(cfg.regularisation), solver="newton-cholesky").fit(scaler.transform(x_a), y_a)
    member_scores = model.decision_function(scaler.transform(x_members))
    nonmember_scores = model.decision_function(scaler.transform(x_nonmembers))

    test = welch_greater(member_scores[b_members], nonmember_scores[b_nonmembers])
    ranks = rank_greater(member_scores[b_members], nonmember_scores[b_nonmembers])
    metrics = {
        "p_value": test.p_value,
        "statistic": test.t,
        "flag": float(test.p_value < cfg.alpha),
        "n_examples": float(len(members) + len(nonmembers)),
        "n_members": float(len(members)),
        "n_nonmembers": float(len(nonmembers)),
        "n_members_half_a": float(a_members.size),
        "n_nonmembers_half_a": float(a_nonmembers.size),
        "n_members_half_b": float(b_members.size),
        "n_nonmembers_half_b": float(b_nonmembers.size),
        "welch_df": test.df,
        "mean_difference": test.mean_difference,
        "cohens_d": test.cohens_d,
        "auc_half_b": ranks.auc,  # descriptive: P(a member's half-B score exceeds a non-member's)
        "intercept": float(model.intercept_[0]),
        # Cohen's d detected with power 0.8 at half B's sizes
        "mde": detector_mde(DECLARATION.power, int(b_members.size), float(cfg.alpha),
                            n_negative=int(b_nonmembers.size)),
    }
    metrics.update({f"weight.{name}": float(weight) for name, weight in zip(names, model.coef_[0])})

    half = np.full(len(members) + len(nonmembers), "A", dtype=object)
    half[b_members] = "B"
    half[len(members) + b_nonmembers] = "B"
    table = pd.DataFrame({
        "example_id": [*members["example_id"], *nonmembers["example_id"]],
        "member": np.r_[np.ones(len(members), bool), np.zeros(len(nonmembers), bool)],
        "half": half,
        **{name: np.r_[x_members[:, i], x_nonmembers[:, i]] for i, name in enumerate(names)},
        "score": np.r_[member_scores, nonmember_scores],
    })
    return DetectorResult(metrics=metrics, table=table)


DECLARATION = DetectorDeclaration(
    name="dataset_inference",
    schema=DatasetInferenceConfig,
    evaluator="medexp.evaluators.dataset_tests:dataset_inference",
    inputs=frozenset({Input.model, Input.nonmembers}),
    controls=SCORING_CONTROLS,
    power=PowerFormula(TWO_SAMPLE_T, "one", "members and non-members of half B (the tested half; half A fits the model)",
                       "Cohen's d of the aggregated membership score",
                       "one-sided Welch t-test of the linear model's scores on half B: members above non-members"),
    power_count="medexp.evaluators.dataset_tests:tested_halves",
    docs="docs/detectors.md#dataset-level-membership-tests-dataset_inference-codec",
)
