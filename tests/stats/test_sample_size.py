"""medexp.stats.sample_size: every MDE formula against a Monte Carlo simulation of the test it stands for
(at the MDE the test rejects at the nominal power, at effect 0 at about alpha), one value by hand
each, and the n-needed inverse round-trips. Simulations: 2,000 draws, fixed seeds; the rejection
rate of 2,000 draws has a standard error of 0.009 at 0.8 and 0.005 at 0.05."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from medexp.stats import sample_size as pw

DRAWS = 2000
POWER_TOLERANCE = 0.04   # |simulated power at the MDE - 0.8|: 4.4 standard errors
ALPHA_TOLERANCE = 0.02   # |simulated rejection at effect 0 - alpha| at alpha 0.05: 4 standard errors
Z95, Z80 = 1.6448536, 0.8416212  # z_{0.95}, z_{0.80}


# ---------------------------------------------------------------- simulated tests


def mcnemar_rejections(delta: float, n: int, discordance: float, alpha: float, sided: str, seed: int) -> float:
    """Exact McNemar (as option_order, slot_guess, perturbation_gap run it) on n items whose arms
    differ by ``delta`` with a ``discordance`` share of discordant items: p10 - p01 = delta."""
    rng = np.random.default_rng(seed)
    cells = rng.multinomial(n, [(discordance + delta) / 2, (discordance - delta) / 2, 1 - discordance], size=DRAWS)
    b, c = cells[:, 0], cells[:, 1]
    p_greater = sps.binom.sf(b - 1, b + c, 0.5)
    if sided == "two":
        p = np.minimum(1, 2 * np.minimum(p_greater, sps.binom.cdf(b, b + c, 0.5)))
        return float(np.mean(p < alpha))
    return float(np.mean(p_greater < alpha))


def binomial_rejections(accuracy: float, n: int, chance: float, alpha: float, seed: int) -> float:
    """Exact one-sided binomial test of n items' accuracy against ``chance`` (text_only's test)."""
    right = np.random.default_rng(seed).binomial(n, accuracy, size=DRAWS)
    return float(np.mean(sps.binom.sf(right - 1, n, chance) < alpha))


def auc_rejections(auc: float, n_pos: int, n_neg: int, alpha: float, seed: int) -> float:
    """One-sided Mann-Whitney test of the AUC (the permutation test's normal limit) on binormal scores."""
    rng = np.random.default_rng(seed)
    shift = math.sqrt(2) * sps.norm.ppf(auc)  # binormal, equal variances: AUC = Phi(shift / sqrt 2)
    scores = np.concatenate([rng.normal(shift, 1, (DRAWS, n_pos)), rng.normal(0, 1, (DRAWS, n_neg))], axis=1)
    rank_sum = sps.rankdata(scores, axis=1)[:, :n_pos].sum(axis=1)
    estimate = (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    z = (estimate - 0.5) / math.sqrt(pw.hanley_mcneil_variance(0.5, n_pos, n_neg))
    return float(np.mean(z > pw.critical_z(alpha)))


def spearman_rejections(rho: float, n: int, alpha: float, seed: int) -> float:
    """One-sided Fisher-z test of Spearman's rho on bivariate normal pairs of Spearman rho ``rho``."""
    rng = np.random.default_rng(seed)
    pearson = 2 * math.sin(math.pi * rho / 6)  # Spearman rho of a bivariate normal: (6/pi) asin(r/2)
    x = rng.normal(size=(DRAWS, n))
    y = pearson * x + math.sqrt(1 - pearson**2) * rng.normal(size=(DRAWS, n))
    rx, ry = sps.rankdata(x, axis=1), sps.rankdata(y, axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    r_s = (rx * ry).sum(axis=1) / np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    z = np.arctanh(r_s) * math.sqrt((n - 3) / pw.SPEARMAN_VARIANCE_FACTOR)
    return float(np.mean(z > pw.critical_z(alpha)))


def t_rejections(d: float, n: int, alpha: float, seed: int) -> float:
    """One-sided one-sample t-test (exch's) on n normal shard differences of mean d SDs."""
    values = np.random.default_rng(seed).normal(d, 1, (DRAWS, n))
    return float(np.mean(sps.ttest_1samp(values, 0, axis=1, alternative="greater").pvalue < alpha))


def welch_rejections(d: float, n_first: int, n_second: int, alpha: float, seed: int) -> float:
    """One-sided Welch t-test (dataset_inference's) of two normal samples whose means differ by d SDs."""
    rng = np.random.default_rng(seed)
    first, second = rng.normal(d, 1, (DRAWS, n_first)), rng.normal(0, 1, (DRAWS, n_second))
    return float(np.mean(sps.ttest_ind(first, second, axis=1, equal_var=False, alternative="greater").pvalue < alpha))


def two_proportion_rejections(effect: float, base_rate: float, n_first: int, n_second: int, alpha: float,
                              seed: int) -> tuple[float, float]:
    """Rejection rates of the one-sided pooled z-test (the formula's) and of Fisher's exact test
    (source_naming's with one stratum) of a first group's rate ``base_rate + effect`` against the
    second's ``base_rate``, on the same draws."""
    rng = np.random.default_rng(seed)
    first, second = rng.binomial(n_first, base_rate + effect, DRAWS), rng.binomial(n_second, base_rate, DRAWS)
    pooled = (first + second) / (n_first + n_second)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (first / n_first - second / n_second) / np.sqrt(pooled * (1 - pooled) * (1 / n_first + 1 / n_second))
    # Fisher: P(A >= a) for A hypergeometric given the margins
    fisher = sps.hypergeom.sf(first - 1, n_first + n_second, first + second, n_first)
    return float(np.mean(z > sps.norm.ppf(1 - alpha))), float(np.mean(fisher < alpha))


# ---------------------------------------------------------------- paired accuracy


@pytest.mark.parametrize("alpha, sided", [(0.05, "one"), (0.01, "one"), (0.05, "two")])
def test_paired_mde_is_detected_at_the_nominal_power(alpha, sided):
    variance = pw.paired_difference_variance(0.5, 0.5)  # 0.25: also the discordant share
    mde = pw.paired_accuracy_mde(400, alpha, 0.8, variance, sided)
    assert abs(mcnemar_rejections(mde, 400, variance, alpha, sided, seed=1) - 0.8) < POWER_TOLERANCE


def test_paired_test_rejects_at_about_alpha_without_an_effect():
    # exact McNemar is conservative (discrete): at most alpha, up to simulation noise
    assert mcnemar_rejections(0.0, 400, 0.25, 0.05, "one", seed=2) < 0.05 + ALPHA_TOLERANCE


def test_paired_mde_by_hand():
    # 451 items (VQA-RAD test), two-sided alpha 0.05, power 0.8, var(D) = 2 * 0.5 * 0.5 * (1 - 0.5) = 0.25:
    # (1.959964 + 0.841621) * sqrt(0.25 / 451) = 2.801585 * 0.0235441 = 0.065960 (6.6 accuracy points)
    assert pw.paired_difference_variance(0.5, 0.5) == pytest.approx(0.25)
    assert pw.paired_accuracy_mde(451, 0.05, 0.8, 0.25, "two") == pytest.approx(0.065960, abs=1e-5)
    # inverse: 0.25 * (2.801585 / 0.05)^2 = 0.25 * 3139.55 = 784.9 -> 785 items
    assert pw.paired_accuracy_n(0.05, 0.05, 0.8, 0.25, "two") == 785


# ---------------------------------------------------------------- accuracy above chance


def test_above_chance_mde_is_detected_at_the_nominal_power():
    mde = pw.above_chance_mde(400, 0.25, 0.05)
    assert abs(binomial_rejections(0.25 + mde, 400, 0.25, 0.05, seed=3) - 0.8) < POWER_TOLERANCE
    assert binomial_rejections(0.25, 400, 0.25, 0.05, seed=4) < 0.05 + ALPHA_TOLERANCE


def test_above_chance_by_hand():
    # effect 0.1 over chance 0.5, one-sided alpha 0.05, power 0.8:
    # (1.644854 * sqrt(0.5 * 0.5) + 0.841621 * sqrt(0.6 * 0.4)) / 0.1 = (0.822427 + 0.412308) / 0.1 = 12.34735;
    # 12.34735^2 = 152.46 -> 153 items
    assert pw.above_chance_n(0.1, 0.5, 0.05) == 153
    # the MDE at n = 100 solves 10 (p1 - 0.5) = 0.822427 + 0.841621 sqrt(p1 (1 - p1)): p1 = 0.62303
    assert pw.above_chance_mde(100, 0.5, 0.05) == pytest.approx(0.12303, abs=1e-4)


# ---------------------------------------------------------------- AUC


def test_auc_mde_is_detected_at_the_nominal_power():
    mde = pw.auc_mde(200, 200, 0.05)
    assert abs(auc_rejections(0.5 + mde, 200, 200, 0.05, seed=5) - 0.8) < POWER_TOLERANCE
    assert abs(auc_rejections(0.5, 200, 200, 0.05, seed=6) - 0.05) < ALPHA_TOLERANCE


def test_hanley_mcneil_variance_by_hand():
    # A = 0.5, 10 + 10: Q1 = Q2 = 1/3, [0.25 + 9 (1/3 - 1/4) + 9 (1/3 - 1/4)] / 100 = 1.75 / 100,
    # the Mann-Whitney null variance (10 + 10 + 1) / (12 * 10 * 10) = 21 / 1200
    assert pw.hanley_mcneil_variance(0.5, 10, 10) == pytest.approx(21 / 1200)
    # A = 0.8, 50 + 50: Q1 = 0.8 / 1.2 = 0.666667, Q2 = 2 * 0.64 / 1.8 = 0.711111,
    # [0.16 + 49 * 0.026667 + 49 * 0.071111] / 2500 = 4.951111 / 2500 = 0.00198044
    assert pw.hanley_mcneil_variance(0.8, 50, 50) == pytest.approx(0.00198044, rel=1e-5)


# ---------------------------------------------------------------- Spearman


def test_spearman_mde_is_detected_at_the_nominal_power():
    mde = pw.spearman_mde(200, 0.05)
    assert abs(spearman_rejections(mde, 200, 0.05, seed=7) - 0.8) < POWER_TOLERANCE
    assert abs(spearman_rejections(0.0, 200, 0.05, seed=8) - 0.05) < ALPHA_TOLERANCE


def test_spearman_mde_by_hand():
    # n = 103: sqrt(1.06 / 100) = 0.102956; (1.644854 + 0.841621) * 0.102956 = 0.255998; tanh = 0.250549
    assert pw.spearman_mde(103, 0.05) == pytest.approx(0.250549, abs=1e-5)


# ---------------------------------------------------------------- one-sample t (exch)


def test_t_mde_is_detected_at_the_nominal_power():
    mde = pw.one_sample_t_mde(30, 0.05)
    assert abs(t_rejections(mde, 30, 0.05, seed=9) - 0.8) < POWER_TOLERANCE
    assert abs(t_rejections(0.0, 30, 0.05, seed=10) - 0.05) < ALPHA_TOLERANCE


def test_t_by_hand():
    # the noncentral t sits just above the normal approximation (z95 + z80) / sqrt(30) = 2.486475 / 5.477226 = 0.453967
    assert (Z95 + Z80) / math.sqrt(30) < pw.one_sample_t_mde(30, 0.05) < 0.47
    # at d = 0 the noncentral t is the central t: power = alpha
    assert pw.one_sample_t_power(0.0, 30, 0.05) == pytest.approx(0.05)
    # G*Power's (and statsmodels TTestPower's) sample sizes for d = 0.5, alpha 0.05, power 0.8: 27 one-tailed, 34 two-tailed
    assert pw.one_sample_t_n(0.5, 0.05) == 27 and pw.one_sample_t_n(0.5, 0.05, sided="two") == 34


@pytest.mark.parametrize("n_first, n_second", [(30, 30), (20, 45)])
def test_two_sample_t_mde_is_detected_at_the_nominal_power(n_first, n_second):
    mde = pw.two_sample_t_mde(n_first, n_second, 0.05)
    assert abs(welch_rejections(mde, n_first, n_second, 0.05, seed=11) - 0.8) < POWER_TOLERANCE
    assert abs(welch_rejections(0.0, n_first, n_second, 0.05, seed=12) - 0.05) < ALPHA_TOLERANCE


def test_two_sample_t_by_hand():
    # the normal approximation (z95 + z80) / sqrt(n1 n2 / (n1 + n2)) = 2.486475 / sqrt(15) = 0.642000,
    # the noncentral t a little above it
    assert (Z95 + Z80) / math.sqrt(15) < pw.two_sample_t_mde(30, 30, 0.05) < 0.66
    assert pw.two_sample_t_power(0.0, 30, 30, 0.05) == pytest.approx(0.05)
    # G*Power's (and statsmodels TTestIndPower's) sample sizes for d = 0.5, alpha 0.05, power 0.8:
    # 51 per group one-tailed, 64 per group two-tailed
    assert pw.two_sample_t_mde(51, 51, 0.05) <= 0.5 < pw.two_sample_t_mde(50, 50, 0.05)
    assert pw.two_sample_t_mde(64, 64, 0.05, sided="two") <= 0.5 < pw.two_sample_t_mde(63, 63, 0.05, sided="two")
    # in all, groups of 50 and 51 already reach it (the power rises with n1 n2 / (n1 + n2))
    assert pw.two_sample_t_n(0.5, 0.05) == 101


# ---------------------------------------------------------------- two proportions (source_naming)


@pytest.mark.parametrize("n_first, n_second, base_rate, alpha", [(300, 300, 1 / 6, 0.05), (200, 350, 0.3, 0.05),
                                                                  (400, 400, 1 / 3, 0.01)])
def test_two_proportions_mde_is_detected_at_the_nominal_power(n_first, n_second, base_rate, alpha):
    mde = pw.two_proportions_mde(n_first, n_second, base_rate, alpha)
    z_power, fisher_power = two_proportion_rejections(mde, base_rate, n_first, n_second, alpha, seed=13)
    z_null, fisher_null = two_proportion_rejections(0.0, base_rate, n_first, n_second, alpha, seed=14)
    assert abs(z_power - 0.8) < POWER_TOLERANCE and abs(z_null - alpha) < ALPHA_TOLERANCE
    # the exact test is conservative (a discrete law): a few points of power short of the formula's,
    # never above alpha at effect 0
    assert 0.8 - 2 * POWER_TOLERANCE < fisher_power <= z_power and fisher_null <= alpha + ALPHA_TOLERANCE / 2


def test_two_proportions_by_hand():
    # p0 = 0.1, p1 = 0.2, alpha 0.05 one-sided, power 0.8, n per group (Fleiss, no continuity correction):
    # [1.644854 sqrt(2 * 0.15 * 0.85) + 0.841621 sqrt(0.2 * 0.8 + 0.1 * 0.9)]^2 / 0.1^2
    # = (0.830610 + 0.420811)^2 / 0.01 = 156.6: 157 per group reach an effect of 0.1, 156 do not
    assert pw.two_proportions_mde(157, 157, 0.1, 0.05) <= 0.1 < pw.two_proportions_mde(156, 156, 0.1, 0.05)
    assert pw.two_proportions_n(0.1, 0.1, 0.05) == 314
    # the MDE solves the formula it states
    n1, n2, p0 = 120, 80, 0.25
    p1 = p0 + pw.two_proportions_mde(n1, n2, p0, 0.01)
    pooled = (n1 * p1 + n2 * p0) / (n1 + n2)
    z_alpha = sps.norm.ppf(0.99)
    assert p1 - p0 == pytest.approx(z_alpha * math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
                                    + Z80 * math.sqrt(p1 * (1 - p1) / n1 + p0 * (1 - p0) / n2))
    assert pw.two_proportions_mde(3, 3, 0.5, 0.01) == math.inf  # three images a side never show it at 1%
    with pytest.raises(ValueError, match="below 1"):
        pw.two_proportions_n(0.6, 0.5, 0.05)


# ---------------------------------------------------------------- inverses and errors


@pytest.mark.parametrize("mde, needed", [
    (lambda n: pw.paired_accuracy_mde(n, 0.01, 0.8, 0.2), lambda e: pw.paired_accuracy_n(e, 0.01, 0.8, 0.2)),
    (lambda n: pw.above_chance_mde(n, 0.3, 0.01), lambda e: pw.above_chance_n(e, 0.3, 0.01)),
    (lambda n: pw.auc_mde(n // 2, n - n // 2, 0.01), lambda e: pw.auc_n(e, 0.01)),
    (lambda n: pw.spearman_mde(n, 0.01), lambda e: pw.spearman_n(e, 0.01)),
    (lambda n: pw.one_sample_t_mde(n, 0.01), lambda e: pw.one_sample_t_n(e, 0.01)),
    (lambda n: pw.two_sample_t_mde(n // 2, n - n // 2, 0.01), lambda e: pw.two_sample_t_n(e, 0.01)),
    # the first group is round(n / 2) of n, as two_proportions_n splits it (the groups' variances differ)
    (lambda n: pw.two_proportions_mde(round(n / 2), n - round(n / 2), 0.2, 0.01),
     lambda e: pw.two_proportions_n(e, 0.2, 0.01)),
])
@pytest.mark.parametrize("n", [50, 451])
def test_the_n_needed_for_the_mde_of_n_is_n(mde, needed, n):
    # the MDE of n items needs n items: n reaches it, n - 1 does not
    assert needed(mde(n)) == n
    assert needed(mde(n - 1)) == n - 1


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="alpha"):
        pw.paired_accuracy_mde(100, 1.5)
    with pytest.raises(ValueError, match="sided"):
        pw.spearman_mde(100, 0.05, sided="left")
    with pytest.raises(ValueError, match="positive"):
        pw.auc_n(0.0, 0.05)
    with pytest.raises(ValueError, match="at least 4"):
        pw.spearman_mde(3, 0.05)
    assert pw.above_chance_mde(2, 0.5, 0.01) == math.inf  # two items can never beat chance at 1%
