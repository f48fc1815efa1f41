"""Power before the run: the minimum detectable effect (MDE) of a test for n, alpha and power,
and its inverse, the n a target effect needs. Pure functions over numbers.

The MDE is the true effect at which the test rejects with probability ``power``. Each family
states its unit:

- paired accuracy (McNemar, the same items answered twice): a difference of two accuracies as a
  fraction (0.066 = 6.6 accuracy points); MDE = (z_{1-alpha} + z_{power}) * sqrt(var(D) / n), D
  the per-item difference in {-1, 0, 1} (lmms-eval#1007's formulation), var(D) = 2 p (1 - p)
  (1 - r) for two arms of accuracy p whose per-item correctness correlates r, which is also the
  discordant share;
- accuracy above chance (a one-sample exact binomial test): accuracy points above the chance
  rate p0, from the normal approximation with the null and alternative variances (Fleiss,
  Levin & Paik 2003, section 2.5);
- AUC: AUC above 0.5, with Hanley & McNeil's (1982) variance of the AUC, the null's variance
  (AUC 0.5: (n1 + n2 + 1) / (12 n1 n2), the Mann-Whitney variance) for the critical value and
  the alternative's for the power (Obuchowski 1998);
- Spearman's rho: the correlation itself, through Fisher's z with variance 1.06 / (n - 3)
  (Fieller, Hartley & Pearson 1957);
- one-sample t-test: Cohen's d (mean over standard deviation), power from the noncentral t
  (the computation of statsmodels' TTestPower, which is not a dependency of medexp);
- two-sample t-test (Welch's, members against non-members): Cohen's d (difference of means over
  the pooled standard deviation), power from the noncentral t with n1 + n2 - 2 degrees of freedom
  and noncentrality d sqrt(n1 n2 / (n1 + n2)) (statsmodels' TTestIndPower; with equal variances
  Welch's degrees of freedom are about n1 + n2 - 2);
- two independent proportions (an audited set's rate against a control set's rate p0): the
  difference p1 - p0 as a fraction, from the normal approximation with the pooled null variance
  and the unpooled alternative's (Fleiss, Levin & Paik 2003, section 4.2).

``sided`` is ``"one"`` (the alternative the detectors test: the effect is positive) or
``"two"`` (z_{1-alpha/2}, the far tail ignored, except in the exact t computation).
"""

from __future__ import annotations

import math
from typing import Callable

from scipy import optimize
from scipy import stats as sps

SIDES = ("one", "two")
SPEARMAN_VARIANCE_FACTOR = 1.06  # Fieller, Hartley & Pearson (1957): var(atanh r_s) = 1.06 / (n - 3)
MAX_N = 10**9  # the inverse searches n below this


def critical_z(alpha: float, sided: str = "one") -> float:
    """The standard normal quantile a test of level ``alpha`` rejects beyond."""
    _check_level(alpha, "alpha")
    if sided not in SIDES:
        raise ValueError(f"sided must be one of {SIDES}, got {sided!r}")
    return float(sps.norm.ppf(1 - alpha / (2 if sided == "two" else 1)))


def power_z(power: float) -> float:
    _check_level(power, "power")
    return float(sps.norm.ppf(power))


# ---------------------------------------------------------------- paired accuracy (McNemar)


def paired_difference_variance(accuracy: float = 0.5, correlation: float = 0.5) -> float:
    """var(D) of the per-item difference of two arms of accuracy ``accuracy`` whose per-item
    correctness correlates ``correlation``: 2 p (1 - p) (1 - r), equal to the discordant share
    (p10 + p01) when the arms are equally accurate. p = 0.5, r = 0.5 (the defaults) give 0.25."""
    _check_level(accuracy, "accuracy")
    if not -1 <= correlation <= 1:
        raise ValueError(f"correlation must lie in [-1, 1], got {correlation}")
    return 2 * accuracy * (1 - accuracy) * (1 - correlation)


def paired_accuracy_mde(n: int, alpha: float, power: float = 0.8, variance: float = 0.25,
                        sided: str = "one") -> float:
    """The smallest accuracy difference (a fraction) a paired test on n items detects:
    (z_{1-alpha} + z_{power}) * sqrt(variance / n), ``variance`` var(D) (the discordant share)."""
    _check_n(n, 1)
    if variance <= 0:
        raise ValueError(f"variance must be positive, got {variance}")
    return (critical_z(alpha, sided) + power_z(power)) * math.sqrt(variance / n)


def paired_accuracy_n(effect: float, alpha: float, power: float = 0.8, variance: float = 0.25,
                      sided: str = "one") -> int:
    """Items a paired test needs to detect an accuracy difference ``effect`` (a fraction)."""
    _check_effect(effect)
    return whole_units(variance * ((critical_z(alpha, sided) + power_z(power)) / effect) ** 2)


# ---------------------------------------------------------------- accuracy above chance


def above_chance_mde(n: int, chance: float, alpha: float, power: float = 0.8, sided: str = "one") -> float:
    """The smallest accuracy above ``chance`` (a fraction, p1 - p0) a one-sample test on n items
    detects: the p1 solving sqrt(n) (p1 - p0) = z_{1-alpha} sqrt(p0 q0) + z_{power} sqrt(p1 q1)."""
    _check_n(n, 1)
    _check_level(chance, "chance")
    z_alpha, z_power = critical_z(alpha, sided), power_z(power)

    def excess(p1: float) -> float:
        return math.sqrt(n) * (p1 - chance) - z_alpha * math.sqrt(chance * (1 - chance)) - z_power * math.sqrt(p1 * (1 - p1))

    if excess(1.0) < 0:
        return math.inf  # even a perfect accuracy would not be detected at this n
    return optimize.brentq(excess, chance, 1.0, xtol=1e-12) - chance


def above_chance_n(effect: float, chance: float, alpha: float, power: float = 0.8, sided: str = "one") -> int:
    """Items a one-sample test needs to detect accuracy ``chance + effect``:
    n = ((z_{1-alpha} sqrt(p0 q0) + z_{power} sqrt(p1 q1)) / effect)^2."""
    _check_effect(effect)
    accuracy = chance + effect
    if accuracy >= 1:
        raise ValueError(f"chance + effect must stay below 1, got {accuracy}")
    root = critical_z(alpha, sided) * math.sqrt(chance * (1 - chance)) + power_z(power) * math.sqrt(accuracy * (1 - accuracy))
    return whole_units((root / effect) ** 2)


# ---------------------------------------------------------------- AUC (Hanley & McNeil)


def hanley_mcneil_variance(auc: float, n_positive: int, n_negative: int) -> float:
    """Hanley & McNeil's (1982) variance of an AUC from n_positive positives (members) and
    n_negative negatives: [A(1-A) + (n1-1)(Q1-A^2) + (n2-1)(Q2-A^2)] / (n1 n2), Q1 = A/(2-A),
    Q2 = 2A^2/(1+A). At A = 0.5 it is (n1 + n2 + 1) / (12 n1 n2)."""
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    return (auc * (1 - auc) + (n_positive - 1) * (q1 - auc**2) + (n_negative - 1) * (q2 - auc**2)) / (n_positive * n_negative)


def auc_mde(n_positive: int, n_negative: int, alpha: float, power: float = 0.8, sided: str = "one") -> float:
    """The smallest AUC above 0.5 (A - 0.5) a test of the AUC detects with n_positive members and
    n_negative non-members: A - 0.5 = z_{1-alpha} sqrt(V(0.5)) + z_{power} sqrt(V(A))."""
    _check_n(n_positive, 1)
    _check_n(n_negative, 1)
    z_alpha, z_power = critical_z(alpha, sided), power_z(power)
    null_sd = math.sqrt(hanley_mcneil_variance(0.5, n_positive, n_negative))

    def excess(auc: float) -> float:
        return auc - 0.5 - z_alpha * null_sd - z_power * math.sqrt(hanley_mcneil_variance(auc, n_positive, n_negative))

    if excess(1.0) < 0:
        return math.inf
    return optimize.brentq(excess, 0.5, 1.0, xtol=1e-12) - 0.5


def auc_n(effect: float, alpha: float, power: float = 0.8, sided: str = "one", positive_share: float = 0.5) -> int:
    """Members plus non-members (members a ``positive_share`` of them) a test of the AUC needs to
    detect an AUC of 0.5 + ``effect``."""
    _check_effect(effect)
    _check_level(positive_share, "positive_share")

    def mde(n: int) -> float:
        n_positive = max(1, round(n * positive_share))
        return auc_mde(n_positive, max(1, n - n_positive), alpha, power, sided)

    return smallest_n(mde, effect, n_min=2)


# ---------------------------------------------------------------- Spearman (Fisher z)


def spearman_mde(n: int, alpha: float, power: float = 0.8, sided: str = "one") -> float:
    """The smallest Spearman rho a test on n pairs detects: tanh((z_{1-alpha} + z_{power}) *
    sqrt(1.06 / (n - 3)))."""
    _check_n(n, 4)
    return math.tanh((critical_z(alpha, sided) + power_z(power)) * math.sqrt(SPEARMAN_VARIANCE_FACTOR / (n - 3)))


def spearman_n(rho: float, alpha: float, power: float = 0.8, sided: str = "one") -> int:
    """Pairs a test of Spearman's rho needs to detect ``rho``: 3 + 1.06 ((z_{1-alpha} + z_{power}) / atanh(rho))^2."""
    _check_effect(rho)
    if rho >= 1:
        raise ValueError(f"rho must lie below 1, got {rho}")
    return whole_units(3 + SPEARMAN_VARIANCE_FACTOR * ((critical_z(alpha, sided) + power_z(power)) / math.atanh(rho)) ** 2)


# ---------------------------------------------------------------- one-sample t-test (Cohen's d)


def one_sample_t_power(d: float, n: int, alpha: float, sided: str = "one") -> float:
    """Power of a one-sample t-test of n values whose mean is d standard deviations above 0."""
    _check_n(n, 2)
    df, noncentrality = n - 1, d * math.sqrt(n)
    if sided == "one":
        return float(sps.nct.sf(sps.t.ppf(1 - alpha, df), df, noncentrality))
    critical = sps.t.ppf(1 - alpha / 2, df)
    # the lower tail P(T < -c) as P(T > c) of the mirrored noncentrality: nct.cdf far in a tail is NaN
    return float(sps.nct.sf(critical, df, noncentrality) + sps.nct.sf(critical, df, -noncentrality))


def one_sample_t_mde(n: int, alpha: float, power: float = 0.8, sided: str = "one") -> float:
    """The smallest Cohen's d a one-sample t-test of n values detects (noncentral t, exact)."""
    _check_n(n, 2)
    _check_level(power, "power")
    critical_z(alpha, sided)  # checks alpha and sided
    upper = 1.0
    while one_sample_t_power(upper, n, alpha, sided) < power:
        upper *= 2
    return optimize.brentq(lambda d: one_sample_t_power(d, n, alpha, sided) - power, 0.0, upper, xtol=1e-10)


def one_sample_t_n(d: float, alpha: float, power: float = 0.8, sided: str = "one") -> int:
    """Values (shards) a one-sample t-test needs to detect Cohen's d."""
    _check_effect(d)
    return smallest_n(lambda n: one_sample_t_mde(n, alpha, power, sided), d, n_min=2)


# ---------------------------------------------------------------- two-sample t-test (Cohen's d)


def two_sample_t_power(d: float, n_first: int, n_second: int, alpha: float, sided: str = "one") -> float:
    """Power of a t-test of two independent samples whose means differ by d pooled standard deviations."""
    _check_n(n_first, 2)
    _check_n(n_second, 2)
    df, noncentrality = n_first + n_second - 2, d * math.sqrt(n_first * n_second / (n_first + n_second))
    if sided == "one":
        return float(sps.nct.sf(sps.t.ppf(1 - alpha, df), df, noncentrality))
    critical = sps.t.ppf(1 - alpha / 2, df)
    return float(sps.nct.sf(critical, df, noncentrality) + sps.nct.sf(critical, df, -noncentrality))


def two_sample_t_mde(n_first: int, n_second: int, alpha: float, power: float = 0.8, sided: str = "one") -> float:
    """The smallest Cohen's d a two-sample t-test of n_first against n_second values detects."""
    _check_n(n_first, 2)
    _check_n(n_second, 2)
    _check_level(power, "power")
    critical_z(alpha, sided)  # checks alpha and sided
    upper = 1.0
    while two_sample_t_power(upper, n_first, n_second, alpha, sided) < power:
        upper *= 2
    return optimize.brentq(lambda d: two_sample_t_power(d, n_first, n_second, alpha, sided) - power, 0.0, upper,
                           xtol=1e-10)


def two_sample_t_n(d: float, alpha: float, power: float = 0.8, sided: str = "one", first_share: float = 0.5) -> int:
    """Values of both samples together (the first a ``first_share`` of them) a two-sample t-test
    needs to detect Cohen's d."""
    _check_effect(d)
    _check_level(first_share, "first_share")

    def mde(n: int) -> float:
        n_first = min(n - 2, max(2, round(n * first_share)))
        return two_sample_t_mde(n_first, n - n_first, alpha, power, sided)

    return smallest_n(mde, d, n_min=4)


# ---------------------------------------------------------------- two independent proportions


def two_proportions_mde(n_first: int, n_second: int, base_rate: float, alpha: float, power: float = 0.8,
                        sided: str = "one") -> float:
    """The smallest rise p1 - p0 of the first group's rate over the second's ``base_rate`` p0 that a
    test of n_first against n_second units detects: the p1 solving p1 - p0 = z_{1-alpha}
    sqrt(pbar qbar (1/n1 + 1/n2)) + z_{power} sqrt(p1 q1 / n1 + p0 q0 / n2), pbar = (n1 p1 + n2 p0) / (n1 + n2)."""
    _check_n(n_first, 1)
    _check_n(n_second, 1)
    _check_level(base_rate, "base_rate")
    z_alpha, z_power = critical_z(alpha, sided), power_z(power)

    def excess(p1: float) -> float:
        pooled = (n_first * p1 + n_second * base_rate) / (n_first + n_second)
        null_sd = math.sqrt(pooled * (1 - pooled) * (1 / n_first + 1 / n_second))
        alternative_sd = math.sqrt(p1 * (1 - p1) / n_first + base_rate * (1 - base_rate) / n_second)
        return p1 - base_rate - z_alpha * null_sd - z_power * alternative_sd

    if excess(1.0) < 0:
        return math.inf  # even a rate of 1 would not be detected at these sizes
    return optimize.brentq(excess, base_rate, 1.0, xtol=1e-12) - base_rate


def two_proportions_n(effect: float, base_rate: float, alpha: float, power: float = 0.8, sided: str = "one",
                      first_share: float = 0.5) -> int:
    """Units of both groups together (the first a ``first_share`` of them) a test of two proportions
    needs to detect a rate of ``base_rate + effect`` against ``base_rate``."""
    _check_effect(effect)
    _check_level(first_share, "first_share")
    if base_rate + effect >= 1:
        raise ValueError(f"base_rate + effect must stay below 1, got {base_rate + effect}")

    def mde(n: int) -> float:
        n_first = min(n - 1, max(1, round(n * first_share)))
        return two_proportions_mde(n_first, n - n_first, base_rate, alpha, power, sided)

    return smallest_n(mde, effect, n_min=2)


# ---------------------------------------------------------------- shared


def whole_units(n: float) -> int:
    """A closed-form n rounded up to whole items, where n within 1e-9 of an integer is that integer:
    the MDE of n items, fed back, gives n times (1 +- a few ulp), which is n, not n + 1."""
    nearest = round(n)
    return nearest if abs(n - nearest) <= 1e-9 * max(1.0, n) else math.ceil(n)


def smallest_n(mde_of_n: Callable[[int], float], effect: float, n_min: int) -> int:
    """The smallest n >= n_min whose MDE is at most ``effect`` (the MDE falls as n grows)."""
    if mde_of_n(n_min) <= effect:
        return n_min
    low, high = n_min, n_min * 2
    while mde_of_n(high) > effect:
        low, high = high, high * 2
        if high > MAX_N:
            raise ValueError(f"an effect of {effect} needs more than {MAX_N} units")
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if mde_of_n(middle) <= effect else (middle, high)
    return high


def _check_level(value: float, name: str) -> None:
    if not 0 < value < 1:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value}")


def _check_n(n: int, minimum: int) -> None:
    if n < minimum:
        raise ValueError(f"n must be at least {minimum}, got {n}")


def _check_effect(effect: float) -> None:
    if not effect > 0:
        raise ValueError(f"the target effect must be positive, got {effect}")
