"""Detector ``membership``: can the canaries (members) be told from non-members?

Seven white-box attacks, each a score per example (higher: "member") against each candidate:

* ``loss``: minus the candidate's loss (Yeom et al., 2018);
* ``independent_loss``: minus the independent model's loss, a control: no model behind it saw
  any of the examples, so its AUC departs from 0.5 only when members and non-members differ;
* ``confidence_ratio``: log p_cand(answer) - log p_ind(answer), the whole answer's probability
  (for a one-token classifier label it equals M(x));
* ``mx``: M(x) = L_ind(x) - L_cand(x), the mean loss per answer token;
* ``lira``: offline Gaussian LiRA (Carlini et al., 2022): the candidate's logit-scaled
  confidence phi = log(p / (1 - p)) of the answer, standardised against the reference models
  that did not train on the example (OUT): every pair's independent model,
  ``detector.reference_models`` and the OUT side of the trained references; one pooled variance
  (or each example's own). The candidates of other seeds are not references: they saw the
  members only, which would give the labels away;
* ``lira_online``: online LiRA, the log likelihood ratio of phi under the example's IN and OUT
  Gaussians, fitted on the trained references (``detector.trained_references``: the candidate's
  recipe over random halves of the members and non-members);
* ``rmia``: RMIA (Zarifzadeh et al., 2024): p(x | candidate) / Pr(x), Pr(x) averaged over the
  references, compared pairwise with the non-members' (the population); also needs trained
  references.

For each attack: ROC AUC (the mean over pairs) with a stratified bootstrap interval (unit:
example), a one-sided permutation test of the AUC (p, unit: example), TPR at the configured
low FPRs (the view that the average AUC hides; with n0 non-members the FPR moves in steps of
1/n0), the Youden threshold and its in-sample accuracy per pair, and the AUC per class. The
cell's ``p_value`` and ``statistic`` are those of ``detector.attack``.

Two checks beside the attacks:

* the distribution-shift control (:mod:`medexp.stats.shift`): a classifier on the inputs alone,
  no model, tries to tell members from non-members; ``shift_confounded`` is 1 when its
  cross-validated AUC is significant at ``alpha``, and then every attack's AUC may measure the
  shift rather than memorisation;
* per-example membership (:mod:`medexp.stats.conformal`): each member's conformal p-value under
  ``detector.attack`` against the non-members' scores, Benjamini-Hochberg over the members, the
  members discovered at ``detector.fdr`` (``n_memorised_at_fdr``, table ``member_discoveries``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from medexp.config.schemas import (
    ATTACKS_NEEDING_IN_REFERENCES,
    ControlKind,
    LiraVariance,
    MembershipAttack,
    MembershipConfig,
)
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.detectors.differential import PairedLosses, metric_key
from medexp.kernel.hashing import derive_seed
from medexp.stats.conformal import conformal_discoveries
from medexp.stats.detector_power import AUC, PowerFormula, detector_mde
from medexp.stats.reference_attacks import TooFewReferences, lira_offline, lira_online, rmia
from medexp.stats.roc import auc_bootstrap_ci, auc_permutation_test, mean_auc, tpr_at_fpr, youden_point
from medexp.stats.shift import ShiftInputs, shift_test

_P_MAX = -1e-15  # log p is capped here, so that phi = log p - log(1 - p) stays finite when p rounds to 1


def attack_scores(losses: PairedLosses, attack: MembershipAttack, lira_variance: LiraVariance = LiraVariance.pooled,
                  rmia_gamma: float = 1.0, rmia_offline_a: float | None = None) -> np.ndarray:
    """(pairs, n) scores of one attack, higher meaning "member"."""
    attack = MembershipAttack(attack)
    if attack is MembershipAttack.loss:
        return -losses.candidate_nll
    if attack is MembershipAttack.independent_loss:
        return -losses.independent_nll
    if attack is MembershipAttack.confidence_ratio:
        return losses.candidate_logprob - losses.independent_logprob
    if attack is MembershipAttack.mx:
        return losses.m
    logprob, member = _references(losses)
    # RMIA's population: the non-members, which no model of the audit saw
    return np.stack([_reference_attack(attack, row, logprob, member, ~losses.member, lira_variance, rmia_gamma,
                                       rmia_offline_a) for row in losses.candidate_logprob])


def _reference_attack(attack: MembershipAttack, target_logprob: np.ndarray, logprob: np.ndarray, member: np.ndarray,
                      population: np.ndarray, lira_variance: LiraVariance, rmia_gamma: float,
                      rmia_offline_a: float | None) -> np.ndarray:
    """One target's scores under a reference attack (lira, lira_online, rmia) against references
    with log p ``logprob`` that trained on the examples where ``member`` holds."""
    if attack is MembershipAttack.rmia:
        return rmia(target_logprob, logprob, member, population, rmia_gamma, rmia_offline_a)
    score = lira_online if attack is MembershipAttack.lira_online else lira_offline
    per_example = LiraVariance(lira_variance) is LiraVariance.per_example
    return score(logit_confidence(target_logprob), logit_confidence(logprob), member, per_example)


def reference_target_aucs(losses: PairedLosses, attack: MembershipAttack, lira_variance: LiraVariance = LiraVariance.pooled,
                          rmia_gamma: float = 1.0, rmia_offline_a: float | None = None) -> np.ndarray:
    """Each trained reference attacked as if it were the candidate, against the other references:
    the AUC on its own IN and OUT examples. The references follow the candidate's recipe with
    known membership, so these AUCs are what the attack reaches on a model trained that way: its
    power at this recipe, and the ceiling to read the candidate's AUC against. Empty when, with a
    reference left out, the rest no longer give every example the references the attack reads
    (offline LiRA: OUT ones; online LiRA: IN and OUT).

    A reference trained on exactly the other examples (its complementary half, 2k+1 for 2k) is
    left out with it. Kept, it would be IN for every example the target is OUT on, so the target's
    members would meet fewer IN references than its non-members (3 of 8 against 4 of 8 with eight
    references), which alone raises RMIA's AUC (Pr(x) is lower for the members); the candidate's
    members and non-members meet the same share (docs/memorization.md measures the difference)."""
    logprob, member = _references(losses)
    aucs = []
    for index in range(len(logprob)):
        if not member[index].any() or member[index].all():
            continue  # not a trained reference: no IN and OUT examples of its own
        others = np.array([row != index and not np.array_equal(member[row], ~member[index])
                           for row in range(len(logprob))])
        try:
            scores = _reference_attack(MembershipAttack(attack), logprob[index], logprob[others], member[others],
                                       ~member[index], lira_variance, rmia_gamma, rmia_offline_a)
        except TooFewReferences:
            return np.empty(0)
        aucs.append(mean_auc(member[index], scores))
    return np.asarray(aucs)


def _references(losses: PairedLosses) -> tuple[np.ndarray, np.ndarray]:
    """Every reference model's log p of the answers and where it trained on the example: the pairs'
    independent models (OUT everywhere) and the reference models. The candidates of other seeds
    are not references: they saw the members only, which would give the labels away."""
    logprob = np.vstack([losses.independent_logprob, losses.reference_logprob])
    member = np.vstack([np.zeros(losses.independent_logprob.shape, dtype=bool), losses.reference_member])
    return logprob, member


def logit_confidence(logprob: np.ndarray) -> np.ndarray:
    """phi = log(p / (1 - p)) from log p, stable near p = 1."""
    logprob = np.minimum(np.asarray(logprob, dtype=np.float64), _P_MAX)
    return logprob - np.log(-np.expm1(logprob))


def available_attacks(losses: PairedLosses) -> list[MembershipAttack]:
    """The attacks these losses allow: the IN-reference attacks only where some reference model
    trained on some of the examples."""
    return [attack for attack in MembershipAttack
            if attack not in ATTACKS_NEEDING_IN_REFERENCES or losses.reference_member.any()]


def membership_detector(losses: PairedLosses, inputs: ShiftInputs, cfg, seed: int) -> DetectorResult:
    """The attacks on ``losses``; the shift control on ``inputs`` (the same examples, in order)."""
    labels = losses.member
    fprs = [float(value) for value in cfg.fprs]
    primary = MembershipAttack(cfg.attack)
    summary, per_pair, per_class, scores = [], [], [], {}
    for attack in available_attacks(losses):
        matrix = attack_scores(losses, attack, cfg.lira_variance, float(cfg.rmia_gamma), _offline_a(cfg))
        scores[attack.value] = matrix.mean(axis=0)
        test = auc_permutation_test(labels, matrix, int(cfg.n_permutations), derive_seed(seed, attack.value, "permutation"))
        low, high = auc_bootstrap_ci(labels, matrix, int(cfg.n_bootstrap), float(cfg.ci_level),
                                     derive_seed(seed, attack.value, "bootstrap"))
        points = [youden_point(labels, row) for row in matrix]
        row = {"attack": attack.value, "auc": test.auc, "auc_ci_low": low, "auc_ci_high": high, "p_value": test.p_value,
               "null_mean": test.null_mean, "null_std": test.null_std,
               **{_tpr_key(fpr): tpr_at_fpr(labels, matrix, fpr) for fpr in fprs},
               "youden_accuracy": float(np.mean([point.accuracy for point in points]))}
        if attack in (MembershipAttack.lira, *ATTACKS_NEEDING_IN_REFERENCES):
            ceiling = reference_target_aucs(losses, attack, cfg.lira_variance, float(cfg.rmia_gamma), _offline_a(cfg))
            if ceiling.size:  # the attack on the trained references themselves (see reference_target_aucs)
                row.update({"reference_target_auc": float(ceiling.mean()), "reference_target_auc_min": float(ceiling.min()),
                            "reference_target_auc_max": float(ceiling.max())})
        summary.append(row)
        for index, (label, point) in enumerate(zip(losses.pair_labels, points)):
            per_pair.append({"attack": attack.value, "pair": index, "models": label,
                             "auc": mean_auc(labels, matrix[index]), "youden_threshold": point.threshold,
                             "youden_tpr": point.tpr, "youden_fpr": point.fpr, "youden_accuracy": point.accuracy})
        per_class += _per_class(losses, matrix, attack)
    table = pd.DataFrame(summary)
    table["n_members"] = int(labels.sum())
    table["n_nonmembers"] = int((~labels).sum())
    table["ci_level"] = float(cfg.ci_level)
    table["resampling_unit"] = "example (stratified by membership; one draw for every pair)"
    chosen = table.set_index("attack").loc[primary.value]
    metrics = {
        "p_value": float(chosen["p_value"]),
        "statistic": float(chosen["auc"]),
        **{f"{row['attack']}_{key}": float(row[key]) for row in summary for key in row if key != "attack"},
        **{f"{primary.value}_auc_class.{metric_key(row['class'])}": row["auc"] for row in per_class
           if row["attack"] == primary.value and np.isfinite(row["auc"])},
        "fpr_resolution": 1.0 / float((~labels).sum()),
        "n_pairs": float(losses.n_pairs),
        "n_references": float(losses.n_pairs + len(losses.reference_labels)),
        "n_members": float(labels.sum()),
        "n_nonmembers": float((~labels).sum()),
        "n_examples": float(labels.size),
        "flag": float(chosen["p_value"] < cfg.alpha),
        # the AUC above 0.5 this test detects with power 0.8 at these members and non-members
        "mde": detector_mde(DECLARATION.power, int(labels.sum()), cfg.alpha, n_negative=int((~labels).sum())),
    }
    shift = shift_test(inputs, labels, int(cfg.shift_folds), int(cfg.shift_permutations), int(cfg.n_bootstrap),
                       float(cfg.ci_level), seed)
    metrics.update({"shift_auc": shift.auc, "shift_auc_ci_low": shift.ci_low, "shift_auc_ci_high": shift.ci_high,
                    "shift_p_value": shift.p_value, "shift_null_mean": shift.null_mean,
                    "shift_folds": float(shift.n_folds), "shift_uses_numeric": float(inputs.numeric is not None),
                    "shift_confounded": float(shift.p_value < cfg.alpha)})
    discoveries = _member_discoveries(losses, scores[primary.value], float(cfg.fdr))
    metrics["n_memorised_at_fdr"] = float(discoveries["discovered"].sum())
    example_scores = pd.DataFrame({"example_id": losses.example_ids, "member": labels, "class": losses.classes, **scores})
    return DetectorResult(metrics, table, "attacks", {"roc": _roc_figure(labels, scores, primary)},
                          extra_tables={"per_pair": pd.DataFrame(per_pair), "per_class_auc": pd.DataFrame(per_class),
                                        "scores": example_scores, "member_discoveries": discoveries})


def _offline_a(cfg) -> float | None:
    return None if cfg.rmia_offline_a is None else float(cfg.rmia_offline_a)


def _member_discoveries(losses: PairedLosses, scores: np.ndarray, fdr: float) -> pd.DataFrame:
    """Per member (most significant first): its score under the cell's attack, its conformal p
    against the non-members, its BH q over the members, and whether q <= fdr."""
    members = losses.member
    found = conformal_discoveries(scores[members], scores[~members], fdr)
    table = pd.DataFrame({"example_id": np.asarray(losses.example_ids, dtype=object)[members],
                          "class": losses.classes[members], "score": scores[members], "conformal_p": found.p_values,
                          "bh_q": found.q_values, "discovered": found.discovered})
    return table.sort_values(["conformal_p", "example_id"], kind="stable").reset_index(drop=True)


def _tpr_key(fpr: float) -> str:
    return f"tpr_at_fpr_{fpr:g}"


def _per_class(losses: PairedLosses, matrix: np.ndarray, attack: MembershipAttack) -> list[dict]:
    rows = []
    for cls in sorted(set(losses.classes)):
        selected = losses.classes == cls
        members, nonmembers = int((selected & losses.member).sum()), int((selected & ~losses.member).sum())
        auc = mean_auc(losses.member[selected], matrix[:, selected]) if members and nonmembers else np.nan
        rows.append({"attack": attack.value, "class": cls, "n_members": members, "n_nonmembers": nonmembers,
                     "auc": auc})
    return rows


def _roc_figure(labels: np.ndarray, scores: dict[str, np.ndarray], primary: MembershipAttack):
    from matplotlib.figure import Figure
    from sklearn.metrics import roc_curve

    figure = Figure(figsize=(10, 4), layout="constrained")
    linear, logarithmic = figure.subplots(1, 2)
    floor = 0.5 / max(1, int((~labels).sum()))
    for name, values in scores.items():
        fpr, tpr, _ = roc_curve(labels, values)
        width = 2.0 if name == primary.value else 1.0
        linear.plot(fpr, tpr, label=name, linewidth=width)
        logarithmic.plot(np.maximum(fpr, floor), np.maximum(tpr, floor), label=name, linewidth=width)
    for axes in (linear, logarithmic):
        axes.plot([floor, 1], [floor, 1], color="gray", linestyle=":", linewidth=0.8)
        axes.set(xlabel="false-positive rate", ylabel="true-positive rate")
    linear.set(title="ROC (scores averaged over pairs)")
    logarithmic.set(xscale="log", yscale="log", title="low-FPR view (log-log)")
    linear.legend(fontsize=7)
    return figure


DECLARATION = DetectorDeclaration(
    name="membership",
    schema=MembershipConfig,
    evaluator="medexp.evaluators.memorization:membership",
    inputs=frozenset({Input.scores, Input.trained_pairs, Input.nonmembers, Input.references}),
    controls=SCORING_CONTROLS - {ControlKind.external_baseline},
    power=PowerFormula(AUC, "one", "members and non-members", "AUC above 0.5",
                       "one-sided permutation test of the attack's AUC"),
    power_count="medexp.evaluators.memorization:membership_sizes",
    docs="docs/memorization.md#detectormembership",
    control_reasons={ControlKind.external_baseline: (
        "a baseline model has no independent counterpart trained without the canaries; name further pairs in "
        "detector.pairs or references in detector.reference_models")},
)
