"""Reference-model membership attacks (LiRA offline and online, RMIA) and the reference halves,
against hand arithmetic, a brute-force RMIA and a seeded simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from medexp.stats.reference_attacks import lira_offline, lira_online, reference_half, reference_halves, rmia

# 3 references x 3 examples, each example IN for one reference (OUT for the other two)
OFFLINE_PHI = np.array([[1.0, 2.0, 0.0], [3.0, 4.0, 1.0], [5.0, 0.0, 2.0]])
OFFLINE_IN = np.array([[False, False, True], [False, True, False], [True, False, False]])
OFFLINE_TARGET = np.array([5.0, 2.0, 2.5])

# 4 references x 2 examples: example 0 IN for references 0, 1; example 1 IN for references 2, 3
ONLINE_PHI = np.array([[3.0, 0.0], [5.0, 1.0], [0.0, 4.0], [2.0, 6.0]])
ONLINE_IN = np.array([[True, False], [True, False], [False, True], [False, True]])
ONLINE_TARGET = np.array([4.0, 2.0])

# RMIA: p(x | target) and p(x | reference) of 3 examples under 2 references
RMIA_TARGET = np.log([0.5, 0.2, 0.15])
RMIA_REFERENCES = np.log([[0.25, 0.4, 0.1], [0.25, 0.4, 0.3]])
RMIA_IN = np.array([[True, False, True], [False, True, False]])
EVERYONE = np.ones(3, dtype=bool)


def test_lira_offline_by_hand_per_example_and_pooled():
    # OUT references: example 0 {1, 3}: mean 2, var 2; example 1 {2, 0}: mean 1, var 2;
    # example 2 {1, 2}: mean 1.5, var 0.5
    own = lira_offline(OFFLINE_TARGET, OFFLINE_PHI, OFFLINE_IN, per_example_variance=True)
    assert own == pytest.approx([3 / math.sqrt(2), 1 / math.sqrt(2), 1 / math.sqrt(0.5)])
    # pooled sigma = sqrt(mean(2, 2, 0.5)) = sqrt(1.5): examples 1 and 2 now tie, while their own
    # variances ranked example 2 (a tight OUT spread) above example 1
    pooled = lira_offline(OFFLINE_TARGET, OFFLINE_PHI, OFFLINE_IN, per_example_variance=False)
    assert pooled == pytest.approx(np.array([3.0, 1.0, 1.0]) / math.sqrt(1.5))
    assert own[2] > own[1]


def test_lira_offline_with_one_out_reference_pools_to_unit_sigma():
    # one OUT reference per example: no spread to estimate, sigma 1.0, the score is phi - mu_out
    phi = np.array([[1.0, 7.0], [4.0, 2.0]])
    inside = np.array([[True, False], [False, True]])
    assert lira_offline([3.0, 3.0], phi, inside, per_example_variance=False) == pytest.approx([3 - 4, 3 - 7])


def test_identical_references_are_floored_not_divided_by_zero():
    phi = np.array([[2.0, 1.0], [2.0, 3.0], [0.0, 5.0]])
    inside = np.array([[False, False], [False, False], [True, True]])
    # example 0's two OUT references agree: sigma is floored at 1e-6, (2.5 - 2) / 1e-6
    scores = lira_offline([2.5, 2.0], phi, inside, per_example_variance=True)
    assert scores[0] == pytest.approx(0.5 / 1e-6)
    assert np.all(np.isfinite(scores))


def test_lira_online_by_hand_per_example_and_pooled():
    # example 0: IN {3, 5} mean 4 var 2; OUT {0, 2} mean 1 var 2; target 4
    # equal sigmas cancel the constants: 0 + (4 - 1)^2 / (2 * 2) = 9/4
    # example 1: IN {4, 6} mean 5 var 2; OUT {0, 1} mean 0.5 var 0.5; target 2
    # -ln sqrt2 - 9/4 + ln sqrt0.5 + 1.5^2 / (2 * 0.5) = ln(1/2)
    own = lira_online(ONLINE_TARGET, ONLINE_PHI, ONLINE_IN, per_example_variance=True)
    assert own == pytest.approx([9 / 4, math.log(0.5)])
    # pooled: s_in^2 = mean(2, 2) = 2, s_out^2 = mean(2, 0.5) = 1.25
    # example 0: 0.5 ln(1.25 / 2) - 0 + 9 / 2.5; example 1: 0.5 ln(1.25 / 2) - 9/4 + 2.25 / 2.5
    pooled = lira_online(ONLINE_TARGET, ONLINE_PHI, ONLINE_IN, per_example_variance=False)
    assert pooled == pytest.approx([0.5 * math.log(0.625) + 3.6, 0.5 * math.log(0.625) - 1.35])


def test_lira_online_pools_over_the_examples_that_have_a_spread():
    # example 0: IN {1, 3} (mean 2, var 2), OUT {0}; example 1: IN {5}, OUT {1, 3} (mean 2, var 2)
    phi = np.array([[1.0, 1.0], [3.0, 3.0], [0.0, 5.0]])
    inside = np.array([[True, False], [True, False], [False, True]])
    # each side pools its one example with a variance: s_in^2 = s_out^2 = 2, so the score is
    # ((phi - mu_out)^2 - (phi - mu_in)^2) / 4: example 0 ((2 - 0)^2 - 0) / 4, example 1 ((5 - 2)^2 - 0) / 4
    scores = lira_online([2.0, 5.0], phi, inside, per_example_variance=False)
    assert scores == pytest.approx([1.0, 9 / 4])


def test_lira_with_one_reference_per_side_uses_unit_sigma():
    phi = np.array([[1.0, 4.0], [3.0, 0.0]])
    inside = np.array([[True, False], [False, True]])
    # example 0: IN 1, OUT 3, target 2 -> ((2 - 3)^2 - (2 - 1)^2) / 2 = 0; example 1: IN 0, OUT 4, target 1 -> (9 - 1) / 2
    assert lira_online([2.0, 1.0], phi, inside, per_example_variance=False) == pytest.approx([0.0, 4.0])


@pytest.mark.parametrize("attack", [lira_offline, lira_online])
def test_lira_refuses_examples_without_out_references(attack):
    phi = np.zeros((2, 3))
    inside = np.array([[True, False, True], [True, True, False]])  # example 0 is IN for both
    with pytest.raises(ValueError, match="1 of 3 examples have fewer than 1 OUT"):
        attack(np.zeros(3), phi, inside, per_example_variance=False)


def test_per_example_variance_needs_two_references_per_side():
    phi = np.zeros((3, 2))
    inside = np.array([[True, False], [False, True], [False, True]])
    # OUT: example 0 has 2, example 1 has 1; IN: example 0 has 1, example 1 has 2
    with pytest.raises(ValueError, match="1 of 2 examples have fewer than 2 OUT.*pooled variance"):
        lira_offline(np.zeros(2), phi, inside, per_example_variance=True)
    with pytest.raises(ValueError, match="1 of 2 examples have fewer than 2 IN"):
        lira_online(np.zeros(2), phi, inside, per_example_variance=True)
    with pytest.raises(ValueError, match="2 of 2 examples have fewer than 1 IN"):
        lira_online(np.zeros(2), phi, np.zeros((3, 2), dtype=bool), per_example_variance=False)


@pytest.mark.parametrize("target, phi, inside, message", [
    (np.zeros((1, 2)), np.zeros((2, 2)), np.eye(2, dtype=bool), "one value per example"),
    (np.zeros(3), np.zeros((2, 2)), np.eye(2, dtype=bool), r"\(references, 3 examples\)"),
    (np.zeros(2), np.zeros((2, 2)), np.eye(3, dtype=bool), "reference_in must have"),
    (np.zeros(2), np.zeros((2, 2)), np.eye(2, dtype=int), "bool matrix"),
    (np.array([0.0, np.nan]), np.zeros((2, 2)), np.eye(2, dtype=bool), "1 of the target's"),
    (np.zeros(2), np.array([[0.0, np.inf], [0.0, 0.0]]), np.eye(2, dtype=bool), "1 of the references'"),
])
def test_malformed_inputs_are_refused(target, phi, inside, message):
    with pytest.raises(ValueError, match=message):
        lira_offline(target, phi, inside, per_example_variance=False)


def test_rmia_online_by_hand():
    # Pr(x) = mean of the references' p: 0.25, 0.4, 0.2; ratio = 0.5/0.25, 0.2/0.4, 0.15/0.2 = 2, 0.5, 0.75
    # gamma 1: example 0 beats both others; example 2 beats example 1 (1.5); example 1 none
    assert rmia(RMIA_TARGET, RMIA_REFERENCES, RMIA_IN, EVERYONE, 1.0, None) == pytest.approx([1.0, 0.0, 0.5])
    # gamma 2: 2/0.5 = 4 and 2/0.75 = 2.67 pass, 0.75/0.5 = 1.5 no longer does
    assert rmia(RMIA_TARGET, RMIA_REFERENCES, RMIA_IN, EVERYONE, 2.0, None) == pytest.approx([1.0, 0.0, 0.0])
    # gamma 3: only 4 passes, one of example 0's two comparisons
    assert rmia(RMIA_TARGET, RMIA_REFERENCES, RMIA_IN, EVERYONE, 3.0, None) == pytest.approx([0.5, 0.0, 0.0])
    # population {0, 1}: example 2, outside it, is compared with both (beats example 1 only)
    population = np.array([True, True, False])
    assert rmia(RMIA_TARGET, RMIA_REFERENCES, RMIA_IN, population, 1.0, None) == pytest.approx([1.0, 0.0, 0.5])


def test_rmia_offline_by_hand():
    # OUT references' p: example 0 0.25 (reference 1), example 1 0.4 (reference 0), example 2 0.3 (reference 1)
    # a = 0.5: Pr = (1.5 m + 0.5) / 2 = 0.4375, 0.55, 0.475; ratio = 1.143, 0.364, 0.316
    assert rmia(RMIA_TARGET, RMIA_REFERENCES, RMIA_IN, EVERYONE, 1.0, 0.5) == pytest.approx([1.0, 0.5, 0.0])
    # a = 1: Pr = m (the constant term vanishes); with p(x2 | target) = 0.12, ratio = 2, 0.5, 0.4
    target = np.log([0.5, 0.2, 0.12])
    assert rmia(target, RMIA_REFERENCES, RMIA_IN, EVERYONE, 1.0, 1.0) == pytest.approx([1.0, 0.5, 0.0])


def _brute_force_rmia(target_logprob, reference_logprob, reference_in, population, gamma, offline_a):
    """Probabilities (not logs) and an explicit comparison of every (x, z) pair."""
    target, references = np.exp(target_logprob), np.exp(reference_logprob)
    if offline_a is None:
        prior = references.mean(axis=0)
    else:
        mean_out = np.array([references[~reference_in[:, j], j].mean() for j in range(target.size)])
        prior = ((1 + offline_a) * mean_out + (1 - offline_a)) / 2
    ratio = target / prior
    scores = np.empty(target.size)
    for x in range(target.size):
        others = [z for z in np.flatnonzero(population) if z != x]
        scores[x] = sum(ratio[x] / ratio[z] >= gamma for z in others) / len(others)
    return scores


@pytest.mark.parametrize("gamma", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("offline_a", [None, 0.3])
def test_rmia_equals_a_brute_force_double_loop(gamma, offline_a):
    rng = np.random.default_rng(7)
    n, count = 800, 6
    target = rng.normal(-2.0, 1.0, n)
    references = rng.normal(-2.0, 1.0, (count, n))
    inside = reference_halves([f"x{j}" for j in range(n)], count, seed=3)
    population = rng.permutation(n) < 400
    expected = _brute_force_rmia(target, references, inside, population, gamma, offline_a)
    assert rmia(target, references, inside, population, gamma, offline_a) == pytest.approx(expected, abs=1e-12)


def test_rmia_online_auc_is_the_log_ratio_auc_at_gamma_one():
    rng = np.random.default_rng(11)
    n = 300
    member = rng.permutation(n) < n // 2
    references = rng.normal(-3.0, 1.0, (4, n))
    target = references.mean(axis=0) + rng.normal(0.5 * member, 1.0)
    inside = np.zeros((4, n), dtype=bool)
    log_ratio = target - (np.log(np.exp(references).mean(axis=0)))
    # the whole set as population: the score is (rank - 1) / (n - 1), no ties, the same AUC exactly
    everyone = rmia(target, references, inside, np.ones(n, dtype=bool), 1.0, None)
    assert roc_auc_score(member, everyone) == pytest.approx(roc_auc_score(member, log_ratio), abs=1e-12)
    # a part of it: the score is monotone in the log ratio, so every member/non-member pair it
    # orders strictly is ordered alike, and the AUCs differ by at most half the tied pairs
    scores = rmia(target, references, inside, rng.permutation(n) < 60, 1.0, None)
    score_gap = scores[member][:, None] - scores[~member][None, :]
    ratio_gap = log_ratio[member][:, None] - log_ratio[~member][None, :]
    assert np.all(np.sign(score_gap[score_gap != 0]) == np.sign(ratio_gap[score_gap != 0]))
    tied = np.mean(score_gap == 0)
    assert 0 < tied < 0.1  # ties exist (60 steps for 300 examples), so the bound below is not vacuous
    assert abs(roc_auc_score(member, scores) - roc_auc_score(member, log_ratio)) <= tied / 2 + 1e-12


@pytest.mark.parametrize("population, gamma, offline_a, message", [
    (np.array([True, False, False]), 1.0, None, "population needs >= 2"),
    (np.ones(2, dtype=bool), 1.0, None, r"\(3,\) bool mask"),
    (np.ones(3, dtype=int), 1.0, None, r"\(3,\) bool mask"),
    (EVERYONE, 0.0, None, "gamma must be a positive"),
    (EVERYONE, 1.0, 1.5, r"offline_a must be in \[0, 1\]"),
])
def test_rmia_refuses_bad_arguments(population, gamma, offline_a, message):
    with pytest.raises(ValueError, match=message):
        rmia(RMIA_TARGET, RMIA_REFERENCES, RMIA_IN, population, gamma, offline_a)


def test_offline_rmia_needs_an_out_reference_per_example():
    inside = np.array([[True, False, True], [True, True, False]])
    with pytest.raises(ValueError, match="1 of 3 examples have fewer than 1 OUT"):
        rmia(RMIA_TARGET, RMIA_REFERENCES, inside, EVERYONE, 1.0, 0.5)
    # online RMIA averages every reference, IN or OUT, so the same matrix is fine there
    assert np.all(np.isfinite(rmia(RMIA_TARGET, RMIA_REFERENCES, inside, EVERYONE, 1.0, None)))


def _simulated_aucs(delta: float, seed: int) -> dict[str, float]:
    """References' phi ~ N(mu_j + delta IN, 1), mu_j ~ N(0, 2^2); the target is IN for half."""
    rng = np.random.default_rng(seed)
    n, count = 4000, 4
    inside = reference_halves([f"example-{j}" for j in range(n)], count, seed)
    mu = rng.normal(0.0, 2.0, n)
    references = mu + delta * inside + rng.normal(size=(count, n))
    member = rng.permutation(n) < n // 2
    target = mu + delta * member + rng.normal(size=n)
    return {"online": roc_auc_score(member, lira_online(target, references, inside, per_example_variance=False)),
            "offline": roc_auc_score(member, lira_offline(target, references, inside, per_example_variance=False)),
            "raw": roc_auc_score(member, target)}


def test_simulated_references_rank_online_over_offline_over_raw():
    # delta = 3, 4 references (2 IN, 2 OUT per example): offline centres on 2 OUT references
    # (noise var 1 + 1/2, AUC ~ Phi(3 / sqrt(3)) = 0.958), online on the midpoint of all 4
    # (1 + 1/4, ~0.971), raw phi carries the sd-2 spread of mu (~Phi(3 / sqrt(10)) = 0.83).
    # Over 20 seeds online - offline was 0.0084 +- 0.0015 (smallest 0.0064) at this n. At delta <= 2
    # online's factor (mu_in - mu_out) is too noisy and online does not reliably beat offline.
    aucs = _simulated_aucs(3.0, seed=2024)
    assert aucs["online"] > aucs["offline"] > aucs["raw"]
    assert aucs["offline"] - aucs["raw"] > 0.05


def test_simulated_references_without_membership_signal_are_at_chance():
    for name, auc in _simulated_aucs(0.0, seed=2024).items():
        assert abs(auc - 0.5) < 0.08, name  # n = 4000: the null sd of an AUC is about 0.009


IDS = [f"case-{j:02d}" for j in range(11)]


def test_reference_halves_balance_and_complement():
    matrix = reference_halves(IDS, 6, seed=5)
    assert matrix.shape == (6, 11) and matrix.dtype == bool
    assert np.all(matrix.sum(axis=0) == 3)  # each example IN for exactly count / 2 references
    assert np.all(matrix[0::2].sum(axis=1) == 5) and np.all(matrix[1::2].sum(axis=1) == 6)  # floor(11 / 2), the rest
    assert np.all(matrix[0::2] ^ matrix[1::2])  # pairs take complementary halves
    assert len({row.tobytes() for row in matrix[0::2]}) == 3  # each pair a fresh permutation


def test_reference_halves_are_seeded_and_built_from_single_halves():
    matrix = reference_halves(IDS, 5, seed=5)
    assert np.array_equal(matrix, reference_halves(IDS, 5, seed=5))
    assert not np.array_equal(matrix, reference_halves(IDS, 5, seed=6))
    assert np.array_equal(matrix[:4], reference_halves(IDS, 6, seed=5)[:4])  # the count does not move a half
    assert all(np.array_equal(matrix[index], reference_half(IDS, index, seed=5)) for index in range(5))
    assert matrix[4].sum() == 5  # an odd count's last reference: a fresh half of its own


def test_a_reference_half_depends_on_the_ids_not_their_order():
    shuffled = list(reversed(IDS))
    half = {value for value, inside in zip(IDS, reference_half(IDS, 3, seed=1)) if inside}
    assert half == {value for value, inside in zip(shuffled, reference_half(shuffled, 3, seed=1)) if inside}


@pytest.mark.parametrize("ids, count, message", [
    (["a", "b", "a"], 2, "1 repeated"),
    (["a"], 2, ">= 2 examples"),
    (["a", "b"], 0, "count must be >= 1"),
])
def test_reference_halves_refuse_bad_arguments(ids, count, message):
    with pytest.raises(ValueError, match=message):
        reference_halves(ids, count, seed=0)
