"""Detector membership: every attack against hand computation, AUCs against scikit-learn, the
null and planted memorization."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import roc_auc_score

from medexp.config.schemas import LiraVariance, MembershipAttack
from medexp.detectors import membership_detector
from medexp.detectors.membership import attack_scores, available_attacks, logit_confidence, reference_target_aucs
from medexp.stats.sample_size import auc_mde
from medexp.stats.reference_attacks import lira_offline
from tests.detectors.differential_tables import (alike_inputs, drawn, drawn_with_references, losses, membership_config,
                                                 shifted_inputs)

MEMBER = [True, True, True, False, False, False]
CLASSES = ["a", "b", "a", "b", "a", "b"]
CANDIDATE_NLL = [[0.2, 0.5, 1.0, 0.9, 0.7, 1.5]]
INDEPENDENT_NLL = [[0.6, 0.5, 1.4, 1.0, 0.6, 1.3]]
# answers of 1, 2, 1, 3, 1, 2 tokens: log p of the whole answer = -nll x tokens
TOKENS = np.array([1, 2, 1, 3, 1, 2])
CANDIDATE_LOGPROB = -np.asarray(CANDIDATE_NLL) * TOKENS
INDEPENDENT_LOGPROB = -np.asarray(INDEPENDENT_NLL) * TOKENS
REFERENCE_LOGPROB = np.array([[-0.5, -1.2, -1.2, -2.7, -0.8, -2.4]])


@pytest.fixture()
def table():
    return losses(MEMBER, CLASSES, CANDIDATE_NLL, INDEPENDENT_NLL, CANDIDATE_LOGPROB, INDEPENDENT_LOGPROB,
                  references=REFERENCE_LOGPROB)


def test_attack_scores_by_hand(table):
    assert attack_scores(table, MembershipAttack.loss)[0].tolist() == pytest.approx([-0.2, -0.5, -1.0, -0.9, -0.7, -1.5])
    assert attack_scores(table, MembershipAttack.independent_loss)[0].tolist() == pytest.approx(
        [-0.6, -0.5, -1.4, -1.0, -0.6, -1.3])
    assert attack_scores(table, MembershipAttack.mx)[0].tolist() == pytest.approx([0.4, 0.0, 0.4, 0.1, -0.1, -0.2])
    # whole-answer log ratio: (nll_ind - nll_cand) x tokens
    assert attack_scores(table, MembershipAttack.confidence_ratio)[0].tolist() == pytest.approx(
        [0.4, 0.0, 0.4, 0.3, -0.1, -0.4])


def test_lira_by_hand(table):
    def phi(logp):
        p = np.exp(logp)
        return np.log(p / (1 - p))

    references = np.vstack([phi(INDEPENDENT_LOGPROB[0]), phi(REFERENCE_LOGPROB[0])])
    mu = references.mean(axis=0)
    pooled = np.sqrt(np.mean(references.var(axis=0, ddof=1)))
    expected = (phi(CANDIDATE_LOGPROB[0]) - mu) / pooled
    assert attack_scores(table, MembershipAttack.lira, LiraVariance.pooled)[0] == pytest.approx(expected)
    per_example = (phi(CANDIDATE_LOGPROB[0]) - mu) / references.std(axis=0, ddof=1)
    assert attack_scores(table, MembershipAttack.lira, LiraVariance.per_example)[0] == pytest.approx(per_example)


def test_logit_confidence_is_stable_at_certainty():
    assert logit_confidence(np.log(0.25)) == pytest.approx(np.log(0.25 / 0.75))
    assert np.isfinite(logit_confidence(0.0)) and logit_confidence(0.0) > 30


def test_lira_with_one_reference_is_the_logit_difference_and_per_example_needs_two():
    table = losses(MEMBER, CLASSES, CANDIDATE_NLL, INDEPENDENT_NLL)
    expected = logit_confidence(-np.asarray(CANDIDATE_NLL[0])) - logit_confidence(-np.asarray(INDEPENDENT_NLL[0]))
    assert attack_scores(table, MembershipAttack.lira)[0] == pytest.approx(expected)
    with pytest.raises(ValueError, match="fewer than 2 OUT references .*pooled variance"):
        attack_scores(table, MembershipAttack.lira, LiraVariance.per_example)


def test_metrics_against_scikit_learn(table):
    result = membership_detector(table, alike_inputs(table), membership_config(n_permutations=999, n_bootstrap=200),
                                 seed=0)
    labels = np.asarray(MEMBER)
    # without reference models that trained on some examples, the attacks that need them are left out
    assert set(result.table["attack"]) == {attack.value for attack in available_attacks(table)}
    assert not {"lira_online", "rmia"} & set(result.table["attack"])
    for attack in available_attacks(table):
        expected = roc_auc_score(labels, attack_scores(table, attack)[0])
        assert result.metrics[f"{attack.value}_auc"] == pytest.approx(expected), attack
    # the primary attack (mx) gives the cell's p and statistic: members' M (0.4, 0, 0.4) against
    # (0.1, -0.1, -0.2): each 0.4 beats all three, 0.0 beats two: 8 of 9 pairs
    assert result.metrics["statistic"] == pytest.approx(8 / 9)
    assert result.metrics["p_value"] == pytest.approx(result.metrics["mx_p_value"])
    assert result.metrics["fpr_resolution"] == pytest.approx(1 / 3)
    # the AUC above 0.5 detectable with power 0.8 from three members and three non-members
    assert result.metrics["mde"] == pytest.approx(auc_mde(3, 3, membership_config().alpha))
    attacks = result.table.set_index("attack")
    assert attacks.loc["mx", "auc_ci_low"] <= 8 / 9 <= attacks.loc["mx", "auc_ci_high"]
    # TPR at FPR 1%: below the 1/3 step, so the TPR with no false positive: members above 0.1 -> 2 of 3
    assert attacks.loc["mx", "tpr_at_fpr_0.01"] == pytest.approx(2 / 3)
    per_class = result.extra_tables["per_class_auc"].set_index(["attack", "class"])
    # class a: members ex0, ex2 (0.4, 0.4) against ex4 (-0.1): AUC 1; class b: ex1 (0.0) against ex3, ex5 (0.1, -0.2): 1/2
    assert per_class.loc[("mx", "a"), "auc"] == pytest.approx(1.0)
    assert per_class.loc[("mx", "b"), "auc"] == pytest.approx(0.5)
    assert result.metrics["mx_auc_class.a"] == pytest.approx(1.0)


@pytest.mark.extended
def test_null_attacks_sit_at_chance_and_p_is_uniform():
    p_values, aucs = [], []
    for seed in range(80):
        table = drawn(seed)
        config = membership_config(n_permutations=99, n_bootstrap=10, shift_permutations=9)
        result = membership_detector(table, alike_inputs(table, seed), config, seed)
        p_values.append(result.metrics["p_value"])
        aucs.append(result.metrics["lira_auc"])
    p_values = np.asarray(p_values)
    assert abs(np.mean(aucs) - 0.5) < 0.02
    rejections = int(np.sum(p_values <= 0.05))
    assert sps.binomtest(rejections, 80, 0.05).pvalue > 0.001, rejections
    assert sps.kstest(p_values, "uniform").pvalue > 0.001


def test_power_planted_members_are_detected_and_the_control_stays_at_chance():
    table = drawn(seed=3, n_members=150, n_nonmembers=150, pairs=3, planted=1.0)
    result = membership_detector(table, alike_inputs(table), membership_config(n_permutations=999, n_bootstrap=200),
                                 seed=0)
    metrics = result.metrics
    assert metrics["p_value"] == pytest.approx(1 / 1000) and metrics["flag"] == 1.0
    for attack in ("loss", "confidence_ratio", "mx", "lira"):
        assert metrics[f"{attack}_auc"] > 0.6 and metrics[f"{attack}_auc_ci_low"] > 0.5, attack
    assert metrics["independent_loss_auc_ci_low"] < 0.5 < metrics["independent_loss_auc_ci_high"]
    assert metrics["mx_tpr_at_fpr_0.01"] > 0.0
    assert len(result.extra_tables["per_pair"]) == 3 * len(available_attacks(table))


def test_trained_references_give_online_lira_and_rmia_which_see_past_the_examples_difficulty():
    table = drawn_with_references(seed=5, planted=0.5)
    config = membership_config(attack="lira_online", trained_references=8, n_permutations=999, n_bootstrap=100,
                               shift_permutations=9)
    metrics = membership_detector(table, alike_inputs(table), config, seed=0).metrics
    assert metrics["p_value"] == pytest.approx(metrics["lira_online_p_value"]) == pytest.approx(1 / 1000)
    # the examples' difficulty varies far more than the models do: the candidate's loss alone ranks
    # hard members below easy non-members, the references' per-example distributions do not
    # (measured on this draw: loss 0.72, lira 0.88, lira_online 0.95, rmia 0.93)
    for attack in ("lira", "lira_online", "rmia"):
        assert metrics[f"{attack}_auc"] > metrics["loss_auc"] + 0.15, attack
    assert metrics["n_references"] == 9  # the pair's independent model and the eight trained references
    assert "lira_online_tpr_at_fpr_0.0001" in metrics and metrics["fpr_resolution"] == pytest.approx(1 / 100)


def test_each_trained_reference_attacked_as_the_candidate_shows_the_attacks_power_at_the_recipe():
    table = drawn_with_references(seed=7, n=300, planted=0.5)
    logprob = np.vstack([table.independent_logprob, table.reference_logprob])
    member = np.vstack([np.zeros((1, 300), bool), table.reference_member])
    expected = []
    for index in range(1, 9):  # the trained references; the independent model trained on none of the examples
        # every model but the target and its complementary half's (2k+1 for 2k; rows 1-8 are references 0-7)
        others = ~np.isin(np.arange(9), [index, 1 + ((index - 1) ^ 1)])
        scores = lira_offline(logit_confidence(logprob[index]), logit_confidence(logprob[others]), member[others], False)
        expected.append(roc_auc_score(member[index], scores))
    assert reference_target_aucs(table, MembershipAttack.lira) == pytest.approx(expected)
    config = membership_config(attack="lira_online", trained_references=8, n_permutations=99, n_bootstrap=10,
                               shift_permutations=9)
    metrics = membership_detector(table, alike_inputs(table), config, seed=0).metrics
    # the candidate trained like the references: its AUC is one more draw from theirs
    for attack in ("lira", "lira_online", "rmia"):
        low, high = metrics[f"{attack}_reference_target_auc_min"], metrics[f"{attack}_reference_target_auc_max"]
        assert low - 0.05 < metrics[f"{attack}_auc"] < high + 0.05, attack
        assert abs(metrics[f"{attack}_reference_target_auc"] - metrics[f"{attack}_auc"]) < 0.06, attack
    assert "mx_reference_target_auc" not in metrics  # an attack without references has nothing to repeat


def test_two_trained_references_give_offline_lira_a_ceiling_and_online_lira_none():
    """With one reference of two complementary halves left out, and its partner with it, every
    example keeps an OUT reference (the pair's independent model) but none an IN one: offline LiRA
    can attack each reference, online LiRA cannot."""
    table = drawn_with_references(seed=3, n=200, references=2, planted=0.5)
    assert len(reference_target_aucs(table, MembershipAttack.lira)) == 2
    assert reference_target_aucs(table, MembershipAttack.lira_online).size == 0


def test_the_references_ceiling_is_unbiased_where_the_candidate_is_one_more_reference():
    """Drawn worlds where the candidate trains like the references (one more random half): over 30
    of them the references' mean AUC, each attacked as the candidate, matches the candidate's RMIA
    AUC on average. Attacked against every other reference, the complementary partner included,
    each reference's members meet 3 IN references of 8 and its non-members 4, and the ceiling sits
    about 0.03 above the candidate (the same gap as on the demo, docs/memorization.md)."""
    from medexp.detectors.membership import _reference_attack, _references
    from medexp.stats.roc import mean_auc

    balanced, with_partner = [], []
    for seed in range(30):
        table = drawn_with_references(seed, n=300, planted=0.3)
        candidate = mean_auc(table.member, attack_scores(table, MembershipAttack.rmia)[0])
        balanced.append(reference_target_aucs(table, MembershipAttack.rmia).mean() - candidate)
        logprob, member = _references(table)
        kept = [mean_auc(member[index], _reference_attack(MembershipAttack.rmia, logprob[index], logprob[others],
                                                          member[others], ~member[index], LiraVariance.pooled, 1.0, None))
                for index in range(1, 9) for others in [np.arange(9) != index]]
        with_partner.append(np.mean(kept) - candidate)
    # measured: -0.001 (standard error 0.005) and +0.028 (0.005)
    assert abs(np.mean(balanced)) < 0.015
    assert np.mean(with_partner) > 0.015


def test_trained_references_null_every_attack_at_chance():
    aucs = {attack: [] for attack in ("lira", "lira_online", "rmia")}
    for seed in range(30):
        table = drawn_with_references(seed, n=120, planted=1.0)
        table.candidate_nll = table.independent_nll.copy()  # a candidate that trained on nothing
        table.candidate_logprob = table.independent_logprob.copy()
        config = membership_config(attack="rmia", trained_references=8, n_permutations=9, n_bootstrap=10,
                                   shift_permutations=9)
        metrics = membership_detector(table, alike_inputs(table, seed), config, seed).metrics
        for attack in aucs:
            aucs[attack].append(metrics[f"{attack}_auc"])
    for attack, values in aucs.items():
        assert abs(np.mean(values) - 0.5) < 0.03, attack


def test_attacks_needing_in_references_are_refused_without_them():
    from medexp.config.ranges import ConfigRangeError, validate

    with pytest.raises(ConfigRangeError, match="trained_references"):
        validate(membership_config(attack="lira_online"))


def test_members_conformal_p_values_and_bh_by_hand(table):
    # mx scores: members 0.4, 0.0, 0.4 against non-members 0.1, -0.1, -0.2 (3 of them):
    # p(0.4) = (1 + 0) / 4, p(0.0) = (1 + 1) / 4; BH over m = 3: sorted 0.25, 0.25, 0.5 ->
    # 0.75, 0.375, 0.5 -> running minimum from the top: 0.375, 0.375, 0.5
    config = membership_config(n_permutations=99, n_bootstrap=10, shift_permutations=9, fdr=0.4)
    result = membership_detector(table, alike_inputs(table), config, seed=0)
    members = result.extra_tables["member_discoveries"]
    assert members["example_id"].tolist() == ["ex0", "ex2", "ex1"]  # most significant first
    assert members["score"].tolist() == pytest.approx([0.4, 0.4, 0.0])
    assert members["conformal_p"].tolist() == pytest.approx([0.25, 0.25, 0.5])
    assert members["bh_q"].tolist() == pytest.approx([0.375, 0.375, 0.5])
    assert members["discovered"].tolist() == [True, True, False]
    assert result.metrics["n_memorised_at_fdr"] == 2
    # at the default FDR of 0.1 no member survives: with 3 non-members no p falls below 1/4
    default = membership_detector(table, alike_inputs(table), membership_config(n_permutations=99, n_bootstrap=10,
                                                                                 shift_permutations=9), seed=0)
    assert default.metrics["n_memorised_at_fdr"] == 0


def test_planted_members_are_named_at_the_fdr():
    table = drawn(seed=4, n_members=150, n_nonmembers=150, pairs=3, planted=3.0)
    config = membership_config(n_permutations=99, n_bootstrap=10, shift_permutations=9)
    result = membership_detector(table, alike_inputs(table), config, seed=0)
    members = result.extra_tables["member_discoveries"]
    assert len(members) == 150 and result.metrics["n_memorised_at_fdr"] == members["discovered"].sum() > 10
    assert members.loc[members["discovered"], "bh_q"].max() <= 0.1 < members.loc[~members["discovered"], "bh_q"].min()


@pytest.mark.extended
def test_the_shift_control_flags_a_source_shift_and_leaves_the_attacks_unchanged():
    """Members and non-members drawn alike by every model (no memorisation) but written in different
    vocabularies: the inputs-only classifier tells them apart, the attacks' metrics do not move."""
    table = drawn(seed=5, n_members=100, n_nonmembers=100)
    config = membership_config(n_permutations=199, n_bootstrap=100, shift_permutations=199)
    alike = membership_detector(table, alike_inputs(table), config, seed=0).metrics
    shifted = membership_detector(table, shifted_inputs(table), config, seed=0).metrics
    assert alike["shift_confounded"] == 0 and alike["shift_p_value"] > 0.05
    assert shifted["shift_confounded"] == 1 and shifted["shift_p_value"] == pytest.approx(1 / 200)
    assert shifted["shift_auc"] > 0.9 and shifted["shift_auc_ci_low"] > 0.8 and shifted["shift_folds"] == 5
    assert shifted["shift_uses_numeric"] == 0
    attack_metrics = [key for key in alike if not key.startswith("shift_")]
    assert {key: shifted[key] for key in attack_metrics} == {key: alike[key] for key in attack_metrics}
