"""Exact tests for answers judged right or wrong: paired arms, intervals, accuracy against chance.

* :func:`mcnemar_exact`: two arms answered on the same items. Only the discordant items carry
  information: ``b`` items right in arm 1 and wrong in arm 2, ``c`` the reverse. Under the null
  that the two arms are exchangeable on every item, ``b`` given ``b + c`` is Binomial(b + c, 1/2);
  the p-value is SciPy's exact binomial test of ``b`` (one-sided ``greater``: arm 1 is right more
  often; ``less``; or ``two-sided``). No discordant item: p = 1.
* :func:`wilson_interval`: the Wilson score interval of a proportion (SciPy's
  ``binomtest(...).proportion_ci(method="wilson")``); the resampling unit is the item.
* :func:`accuracy_above_chance`: ``k`` right out of ``n`` against one chance rate, one-sided exact
  binomial test.
* :func:`poisson_binomial_sf` and :func:`accuracy_above_chances`: when items have different
  chance rates (different numbers of options), the number right under the null is a sum of
  independent Bernoulli(p_i), a Poisson-binomial variable; its exact upper tail comes from the
  convolution recursion over the items (O(n^2), exact to rounding).
* :func:`relabel_test`: one original probe and several perturbed probes per item; under the null
  that an item's probes are exchangeable, which of them is the original is a uniformly random
  label. The statistic is the mean over items of (original right) - (mean of the perturbed
  right); seeded Monte-Carlo relabelling gives the one-sided p with the +1 convention. A plain
  sign flip of that difference would not be exact: with more than one perturbed probe the
  difference is not symmetric about 0 under the null (a 0.9-accurate model gives +0.5 far more
  often than -0.5), while relabelling is exact for any number of probes.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence

import numpy as np

ALTERNATIVES = ("greater", "less", "two-sided")


@dataclass(frozen=True)
class McNemar:
    b: int  # right in arm 1, wrong in arm 2
    c: int  # wrong in arm 1, right in arm 2
    p_value: float
    alternative: str

    @property
    def n_discordant(self) -> int:
        return self.b + self.c


@dataclass(frozen=True)
class Proportion:
    k: int
    n: int
    estimate: float
    low: float
    high: float
    confidence: float


@dataclass(frozen=True)
class ChanceTest:
    k: int  # right answers
    n: int  # items
    expected: float  # expected right answers under the null (sum of the chance rates)
    p_value: float  # P(right >= k) under the null


@dataclass(frozen=True)
class RelabelTest:
    statistic: float  # mean over items of original right - mean perturbed right
    p_value: float  # one-sided: the original is right more often than its perturbed twins
    n_items: int
    n_permutations: int


def _check_alternative(alternative: str) -> None:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {list(ALTERNATIVES)}, got {alternative!r}")


def discordant(first, second) -> tuple[int, int]:
    """``(b, c)``: items right in ``first`` and wrong in ``second``, and the reverse."""
    first, second = np.asarray(first, dtype=bool), np.asarray(second, dtype=bool)
    if first.shape != second.shape:
        raise ValueError(f"paired outcomes must have one shape, got {first.shape} and {second.shape}")
    return int(np.sum(first & ~second)), int(np.sum(~first & second))


def mcnemar_exact(b: int, c: int, alternative: str = "greater") -> McNemar:
    """Exact McNemar test on the discordant counts (``greater``: arm 1 right more often)."""
    from scipy.stats import binomtest

    _check_alternative(alternative)
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    if b + c == 0:
        return McNemar(int(b), int(c), 1.0, alternative)
    return McNemar(int(b), int(c), float(binomtest(int(b), int(b + c), 0.5, alternative=alternative).pvalue),
                   alternative)


def paired_mcnemar(first, second, alternative: str = "greater") -> McNemar:
    """:func:`mcnemar_exact` from two boolean outcome vectors over the same items."""
    return mcnemar_exact(*discordant(first, second), alternative=alternative)


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> Proportion:
    """The proportion ``k / n`` with its Wilson score interval (NaN when ``n`` is 0)."""
    from scipy.stats import binomtest

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if n < 0 or not 0 <= k <= max(n, 0):
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return Proportion(0, 0, float("nan"), float("nan"), float("nan"), confidence)
    interval = binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return Proportion(int(k), int(n), k / n, float(interval.low), float(interval.high), confidence)


def accuracy_above_chance(k: int, n: int, chance: float) -> ChanceTest:
    """One-sided exact binomial test of ``k`` right out of ``n`` against the rate ``chance``."""
    from scipy.stats import binomtest

    if not 0 <= chance <= 1:
        raise ValueError(f"a chance rate lies in [0, 1], got {chance}")
    if n == 0:
        return ChanceTest(0, 0, 0.0, 1.0)
    p_value = binomtest(int(k), int(n), chance, alternative="greater").pvalue
    return ChanceTest(int(k), int(n), n * chance, float(p_value))


def poisson_binomial_pmf(probabilities: Sequence[float]) -> np.ndarray:
    """P(S = s) for s = 0..n, S a sum of independent Bernoulli(p_i): the convolution recursion."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if probabilities.ndim != 1:
        raise ValueError("the success probabilities must be a flat sequence")
    if np.any(np.isnan(probabilities)) or np.any((probabilities < 0) | (probabilities > 1)):
        raise ValueError("every success probability must lie in [0, 1]")
    pmf = np.zeros(probabilities.size + 1)
    pmf[0] = 1.0
    for index, p in enumerate(probabilities, start=1):
        # adding item `index`: P_new(s) = P(s) (1 - p) + P(s - 1) p
        pmf[1:index + 1] = pmf[1:index + 1] * (1.0 - p) + pmf[:index] * p
        pmf[0] *= 1.0 - p
    return pmf


def poisson_binomial_sf(k: int, probabilities: Sequence[float]) -> float:
    """P(S >= k) for S a sum of independent Bernoulli(p_i)."""
    pmf = poisson_binomial_pmf(probabilities)
    if k <= 0:
        return 1.0
    if k > pmf.size - 1:
        return 0.0
    return float(min(1.0, pmf[k:].sum()))


def accuracy_above_chances(correct, chances) -> ChanceTest:
    """One-sided exact test of the number right when item ``i`` is right by chance with
    probability ``chances[i]`` (the binomial test when every rate is the same)."""
    correct = np.asarray(correct, dtype=bool)
    chances = np.asarray(chances, dtype=np.float64)
    if correct.shape != chances.shape:
        raise ValueError(f"one chance rate per item: {correct.shape} outcomes, {chances.shape} rates")
    k = int(correct.sum())
    return ChanceTest(k, int(correct.size), float(chances.sum()), poisson_binomial_sf(k, chances))


def relabel_test(original, perturbed: Sequence, n_permutations: int, seed: int) -> RelabelTest:
    """Within-item relabelling test of original-right minus mean perturbed-right (one-sided).

    ``original[i]`` is item i's original outcome; ``perturbed[i]`` the outcomes of its perturbed
    probes (at least one each; items may have different numbers).
    """
    original = np.asarray(original, dtype=np.float64)
    if len(perturbed) != original.size:
        raise ValueError(f"{original.size} original outcomes but {len(perturbed)} perturbed groups")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations}")
    if original.size == 0:
        return RelabelTest(float("nan"), 1.0, 0, n_permutations)
    groups = [np.asarray(values, dtype=np.float64) for values in perturbed]
    if any(group.size == 0 for group in groups):
        raise ValueError("every item needs at least one perturbed outcome")
    sizes = np.array([group.size + 1 for group in groups])
    # An item's statistic depends only on the outcome labelled original: with m = V + 1 probes and
    # total t, original x gives x - (t - x) / V = (m x - t) / V.
    totals = original + np.array([group.sum() for group in groups])
    observed = float(np.mean((sizes * original - totals) / (sizes - 1)))
    rng = np.random.default_rng(seed)
    exceed = 0
    tolerance = 1e-12 * max(1.0, abs(observed))
    for start in range(0, n_permutations, 1000):
        rows = min(1000, n_permutations - start)
        # the outcome of a uniformly chosen probe of each item: right with probability t / m
        picks = rng.integers(0, sizes, size=(rows, sizes.size))
        picked = (picks < totals[None, :]).astype(np.float64)  # the first t of m probes are the right ones
        draws = np.mean((sizes * picked - totals) / (sizes - 1), axis=1)
        exceed += int(np.sum(draws >= observed - tolerance))
    return RelabelTest(observed, (1 + exceed) / (1 + n_permutations), int(original.size), n_permutations)
