"""Power by simulation: the minimum detectable effect (MDE) of the detectors whose test has no
closed power formula (whose declarations say ``power=Simulated(...)``), each simulated through the
statistics functions its detector calls, on synthetic data from a stated generative model.

It lives with the detectors, not in ``medexp.stats``, because two of the tests it runs are the
detectors' own functions (image_nn's calibrated threshold and beta-binomial flag-count test,
topk_jaccard's top-K sets and Bonferroni-corrected target p-value, for its hypergeometric null).
Pure: no files; the cache is ``medexp.evaluators.simulated_power_cache``'s.

Each kind's draw returns the test's p-value for one synthetic data set at a given effect; the
rejection rate at ``alpha`` over ``n_sim`` draws estimates the power. Draw i is seeded from
``(seed, i)`` whatever the effect (common random numbers): each draw's noise is the same at
every effect and a larger effect only adds signal to it (the memorised examples of a larger
effect include those of a smaller one), so the estimated power rises with the effect and
bisection finds where it crosses ``power``. Count effects (examples memorised, images copied,
examples shared) are searched over whole counts (doubling from 1, then bisection); continuous
ones (SDs, Cohen's d) by bracketing (doubling from 0.25) and 5 bisection steps; the MDE is the
smallest effect tried whose estimated power reached ``power``. The permutation tests inside run ``ceil(5 / alpha) - 1``
permutations (499 at alpha 0.01), so the smallest p-value, 1 / (P + 1), is a fifth of alpha; the
detectors' own 10,000 permutations resolve p more finely, so the simulated power is slightly
conservative (a test with fewer permutations rejects slightly less often).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from medexp.config.schemas import OverlapNull, RankBy
from medexp.detectors.image_nn import flag_count_p_value, flagged_at, null_rank, null_threshold
from medexp.detectors.topk_jaccard import ranked_tops, target_p_value
from medexp.kernel.hashing import derive_seed
from medexp.stats.cohort import cohort_relabel_overlap_test, cohort_relabel_test, deltas_vs_cohort, top_k_overlap
from medexp.stats.summaries import mean_difference_test

SIMULATION_VERSION = 2  # bump when a generative model or the search changes: cached MDEs are keyed by it
DEFAULT_SIMULATIONS = 200
LIFT = 10.0  # noise SDs added to a memorised example's score: it clears any threshold the noise reaches
LARGEST_SCALE = 16  # the n an effect needs is searched up to this many times the benchmark's
BISECTION_STEPS = 5  # a 32nd of the bracket: about the Monte Carlo error of the MDE at 200 draws
_THRESHOLD_DRAWS = 200_000  # rows of the seeded null draw that fixes mink_tail's threshold

Sizes = Mapping[str, float]


@dataclass(frozen=True)
class SimulatedTest:
    """How one detector kind's test is simulated.

    ``draw(sizes, effect, assumptions, n_permutations, rng)`` returns the p-value of one synthetic
    data set. ``count_of`` names the size a count effect is a share of (the effect is then
    count / size) and ``largest`` the largest effect searched; ``lever`` is the size that
    ``effect=`` scales to find the n it needs, or None with the reason n is not the lever."""

    test: str
    model: str
    effect_unit: str
    n_unit: str
    draw: Callable[[Sizes, float, Mapping[str, float], int, np.random.Generator], float]
    largest: Callable[[Sizes], float]
    count_of: str | None  # None: a continuous effect; "": a count in its own unit (not a share)
    lever: str | None
    lever_unit: str = ""  # what the lever counts, in words
    not_the_lever: str = ""
    permutation_test: bool = True  # whether the draws run a permutation test (of simulation_permutations(alpha))
    assumptions: Mapping[str, float] = field(default_factory=dict)  # names and defaults the model needs


@dataclass(frozen=True)
class SimulatedMDE:
    """The MDE of one simulated test (NaN when even the largest effect searched misses the power)."""

    mde: float
    power_at_mde: float  # the estimated rejection rate at the MDE
    null_rate: float  # the estimated rejection rate at effect 0 (at most alpha plus MC error)
    n_sim: int
    n_permutations: int


def simulation_permutations(alpha: float) -> int:
    """P = ceil(5 / alpha) - 1: the smallest p-value 1 / (P + 1) is alpha / 5."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    return math.ceil(5 / alpha - 1e-9) - 1


# ---------------------------------------------------------------- the kinds' draws


@functools.lru_cache(maxsize=32)
def null_tail_threshold(n_models: int, tail_rate: float) -> float:
    """The Delta a clean model exceeds with probability ``tail_rate`` (iid N(0, 1) cohort scores),
    from a seeded draw of ``_THRESHOLD_DRAWS`` examples."""
    rng = np.random.default_rng(derive_seed("power_simulation", "mink_tail_threshold", n_models))
    deltas = deltas_vs_cohort(rng.standard_normal((_THRESHOLD_DRAWS, n_models)))
    return float(np.quantile(deltas[:, 0], 1 - tail_rate))


def _cohort_noise(sizes: Sizes, rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((int(sizes["examples"]), int(sizes["models"])))


def _memorised(n: int, share: float, rng: np.random.Generator) -> np.ndarray:
    """The first round(share n) of a random order of the n examples: a larger share keeps a smaller one's."""
    return rng.permutation(n)[: round(share * n)]


def _mink_tail_draw(sizes, effect, assumptions, n_permutations, rng) -> float:
    scores = _cohort_noise(sizes, rng)
    memorised = _memorised(scores.shape[0], effect, rng)
    threshold = null_tail_threshold(scores.shape[1], float(assumptions["tail_rate"]))
    scores[memorised, 0] += threshold + LIFT
    deltas = deltas_vs_cohort(scores)
    return cohort_relabel_test(deltas > threshold, 0, n_permutations, int(rng.integers(2**32))).p_value


def _loss_draw(sizes, effect, assumptions, n_permutations, rng) -> float:
    nll = _cohort_noise(sizes, rng) + rng.standard_normal((int(sizes["examples"]), 1))  # + item easiness
    nll[:, 0] -= effect
    return cohort_relabel_test(deltas_vs_cohort(-nll), 0, n_permutations, int(rng.integers(2**32))).p_value


def _topk_scores(sizes, effect, rng) -> np.ndarray:
    scores = _cohort_noise(sizes, rng)
    shared = rng.permutation(scores.shape[0])[: int(effect)]
    scores[shared, :2] += LIFT  # the target (column 0) and one leaky reference (column 1)
    return scores


def _topk_relabel_draw(sizes, effect, assumptions, n_permutations, rng) -> float:
    scores = _topk_scores(sizes, effect, rng)
    return cohort_relabel_overlap_test(scores, int(sizes["top_k"]), bool(int(sizes["rank_by_delta"])), n_permutations,
                                       int(rng.integers(2**32))).p_value


def _topk_hypergeometric_draw(sizes, effect, assumptions, n_permutations, rng) -> float:
    scores = _topk_scores(sizes, effect, rng)
    rank_by = RankBy.delta if int(sizes["rank_by_delta"]) else RankBy.score  # a number, as every size
    tops = ranked_tops(scores, rank_by, int(sizes["top_k"]))
    pairs = [top_k_overlap(tops[0], tops[other], scores.shape[0]).p_value for other in range(1, len(tops))]
    return target_p_value(np.asarray(pairs))


def _image_nn_draw(sizes, effect, assumptions, n_permutations, rng) -> float:
    n, m = int(sizes["images"]), int(sizes["calibration"])
    calibration = rng.random(m)
    distances = rng.random(n)
    distances[_memorised(n, effect, rng)] = 0.0  # copies of corpus images: flagged whatever tau
    tau_alpha = float(sizes["tau_alpha"])
    flagged = int(np.count_nonzero(flagged_at(distances, null_threshold(calibration, tau_alpha))))
    return flag_count_p_value(flagged, n, m, null_rank(tau_alpha, m))


def _memorization_draw(sizes, effect, assumptions, n_permutations, rng) -> float:
    members = rng.standard_normal(int(sizes["members"])) + effect
    nonmembers = rng.standard_normal(int(sizes["nonmembers"]))
    return mean_difference_test(members, nonmembers, n_permutations, int(rng.integers(2**32))).p_value


_COHORT_NULL = ("null: on every example the cohort's models are exchangeable (iid N(0, 1) scores; an item's "
                "easiness, shared by all models, cancels in Delta)")

_TOPK_MODEL = ("per-example Min-K%++ scores iid N(0, 1) for the target and each reference; the target and one "
               "leaky reference memorised the same examples, which top both rankings")
_TOPK_NOT_THE_LEVER = ("n is not the lever: the shared examples needed fall only as the chance overlap K^2/n "
                       "shrinks; top_k and the cohort size set them")

SIMULATED_TESTS = {
    "mink_tail": SimulatedTest(
        test="one-sided cohort-relabel permutation test of the share of examples with Delta > flag_threshold",
        model=("per-example Min-K%++ scores of the target and the cohort's references, iid N(0, 1); "
               "flag_threshold sits where a clean model's Delta exceeds it on tail_rate of the examples; the "
               "target memorised a share of the examples, whose Delta then clears the threshold; " + _COHORT_NULL),
        effect_unit="share of the examples the target memorised (Delta lifted above flag_threshold)",
        n_unit="examples", draw=_mink_tail_draw, largest=lambda sizes: 1.0, count_of="examples", lever="examples",
        lever_unit="examples", assumptions={"tail_rate": 0.01}),
    "loss": SimulatedTest(
        test="one-sided cohort-relabel permutation test of the mean loss gap (cohort median NLL - target NLL)",
        model=("per-example mean NLL = item easiness N(0, 1) + model noise N(0, 1) for the target and each "
               "reference; the target's NLL lowered by the effect on every example; " + _COHORT_NULL),
        effect_unit="NLL the target saves on every example, in SDs of one model's per-example loss noise",
        n_unit="examples", draw=_loss_draw, largest=lambda sizes: 8.0, count_of=None, lever="examples",
        lever_unit="examples"),
    "topk_jaccard": SimulatedTest(
        test=("one-sided cohort-relabel permutation test of the target's largest top-K overlap with a reference "
              "(detector.null=relabel, the default)"),
        model=_TOPK_MODEL + "; " + _COHORT_NULL,
        effect_unit="examples in both the target's and the leaky reference's top-K (of top_k)",
        n_unit="examples", draw=_topk_relabel_draw, largest=lambda sizes: float(sizes["top_k"]), count_of="",
        lever=None, not_the_lever=_TOPK_NOT_THE_LEVER),
    "topk_jaccard_hypergeometric": SimulatedTest(
        test=("hypergeometric tests of the target's top-K overlaps, the smallest p Bonferroni-corrected over its pairs "
              "(detector.null=hypergeometric, the audit's test)"),
        model=(_TOPK_MODEL + " (independent rankings, the hypergeometric null; shared easiness, the audit's confound, "
               "is left out)"),
        effect_unit="examples in both the target's and the leaky reference's top-K (of top_k)",
        n_unit="examples", draw=_topk_hypergeometric_draw, largest=lambda sizes: float(sizes["top_k"]), count_of="",
        lever=None, permutation_test=False, not_the_lever=_TOPK_NOT_THE_LEVER),
    "image_nn": SimulatedTest(
        test="one-sided beta-binomial test of the flagged-image count against the calibrated rate",
        model=("nearest-neighbour distances of benchmark images and of the calibration sample iid (any "
               "continuous law: the test uses ranks only); a share of the benchmark images are copies of "
               "corpus images (distance 0, flagged whatever tau)"),
        effect_unit="share of the benchmark images that are copies of corpus images (flag rate above the calibrated rate)",
        n_unit="distinct benchmark images", draw=_image_nn_draw, largest=lambda sizes: 1.0, count_of="images",
        lever="images", lever_unit="distinct benchmark images", permutation_test=False),
    "memorization": SimulatedTest(
        test="one-sided permutation test of the members' mean M(x) above the non-members'",
        model="M(x) (averaged over the pairs) N(0, 1) for non-members and N(d, 1) for members",
        effect_unit="Cohen's d of the members' M(x) over the non-members'",
        n_unit="members and non-members", draw=_memorization_draw, largest=lambda sizes: 8.0, count_of=None,
        lever="members", lever_unit="members (the non-members scaled in proportion)"),
}


def simulated_kind(kind: str, detector_cfg) -> str:
    """The entry of SIMULATED_TESTS that simulates a detector's own test: topk_jaccard's follows
    its ``null`` (the relabel test by default, the hypergeometric tests when asked for)."""
    if kind == "topk_jaccard" and OverlapNull(detector_cfg.null) is OverlapNull.hypergeometric:
        return "topk_jaccard_hypergeometric"
    return kind


def simulated_test(kind: str) -> SimulatedTest:
    if kind not in SIMULATED_TESTS:
        raise KeyError(f"no simulated test for detector kind {kind!r}; simulated kinds: {sorted(SIMULATED_TESTS)}")
    return SIMULATED_TESTS[kind]


def assumptions_of(kind: str, given: Mapping[str, float] | None = None) -> dict[str, float]:
    """The kind's assumptions, its defaults replaced by ``given``'s values (unknown names are refused)."""
    defaults = dict(simulated_test(kind).assumptions)
    unknown = set(given or {}) - set(defaults)
    if unknown:
        raise ValueError(f"detector kind {kind!r} has no simulation assumption {sorted(unknown)} (has {sorted(defaults)})")
    return {**defaults, **(given or {})}


# ---------------------------------------------------------------- power, MDE and n


def rejection_rate(kind: str, sizes: Sizes, effect: float, alpha: float, n_sim: int = DEFAULT_SIMULATIONS,
                   assumptions: Mapping[str, float] | None = None, seed: int | None = None) -> float:
    """Share of ``n_sim`` seeded draws at ``effect`` whose p-value is below ``alpha``."""
    test = simulated_test(kind)
    values = assumptions_of(kind, assumptions)
    n_permutations = simulation_permutations(alpha)
    base = derive_seed("power_simulation", kind) if seed is None else seed
    rejected = sum(test.draw(sizes, effect, values, n_permutations, np.random.default_rng([base, draw])) < alpha
                   for draw in range(n_sim))
    return rejected / n_sim


def simulated_mde(kind: str, sizes: Sizes, alpha: float, power: float = 0.8, n_sim: int = DEFAULT_SIMULATIONS,
                  assumptions: Mapping[str, float] | None = None) -> SimulatedMDE:
    """The smallest effect whose estimated power reaches ``power`` (module docstring: the search)."""
    if not 0 < power < 1:
        raise ValueError(f"power must lie in (0, 1), got {power}")
    test = simulated_test(kind)

    def rate(effect: float) -> float:
        return rejection_rate(kind, sizes, effect, alpha, n_sim, assumptions)

    null_rate = rate(0.0)
    largest = test.largest(sizes)
    if test.count_of is not None:  # a whole count of examples or images
        unit = float(sizes[test.count_of]) if test.count_of else 1.0
        found = smallest_reaching(lambda count: rate(count / unit), power, 1, round(largest * unit), start=1)
        if found is None:
            return SimulatedMDE(math.nan, math.nan, null_rate, n_sim, simulation_permutations(alpha))
        count, reached = found
        return SimulatedMDE(count / unit, reached, null_rate, n_sim, simulation_permutations(alpha))
    low, high = 0.0, min(0.25, largest)
    high_rate = rate(high)
    while high_rate < power:
        if high >= largest:
            return SimulatedMDE(math.nan, math.nan, null_rate, n_sim, simulation_permutations(alpha))
        low, high = high, min(2 * high, largest)
        high_rate = rate(high)
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2
        middle_rate = rate(middle)
        if middle_rate >= power:
            high, high_rate = middle, middle_rate
        else:
            low = middle
    return SimulatedMDE(high, high_rate, null_rate, n_sim, simulation_permutations(alpha))


def smallest_reaching(rate_of: Callable[[int], float], power: float, low: int, high: int,
                      start: int | None = None) -> tuple[int, float] | None:
    """The smallest whole number in [low, high] whose rate reaches ``power`` (rates rising with it),
    with that rate; None when none does. From ``start`` (default ``high``) the search doubles
    upwards until a rate reaches ``power``, then bisects: a large n is costly to simulate, so it
    is tried only when the smaller ones fall short."""
    probe = high if start is None else min(max(start, low), high)
    probe_rate = rate_of(probe)
    while probe_rate < power:
        if probe >= high:
            return None
        low, probe = probe + 1, min(2 * probe, high)
        probe_rate = rate_of(probe)
    high, high_rate = probe, probe_rate
    while low < high:
        middle = (low + high) // 2
        middle_rate = rate_of(middle)
        if middle_rate >= power:
            high, high_rate = middle, middle_rate
        else:
            low = middle + 1
    return high, high_rate


def simulated_n(kind: str, sizes: Sizes, effect: float, alpha: float, power: float = 0.8,
                n_sim: int = DEFAULT_SIMULATIONS, assumptions: Mapping[str, float] | None = None,
                largest_scale: int = LARGEST_SCALE) -> int | None:
    """The smallest n of the kind's lever (other sizes scaled with it, members with non-members)
    whose estimated power at ``effect`` reaches ``power``; None beyond ``largest_scale`` times the
    given n. Count effects are shares, so the count at n is round(effect n)."""
    test = simulated_test(kind)
    if test.lever is None:
        raise ValueError(test.not_the_lever)
    given = int(sizes[test.lever])

    def scaled(n: int) -> dict[str, float]:
        resized = dict(sizes)
        resized[test.lever] = n
        if test.lever == "members":  # keep the non-members' share
            resized["nonmembers"] = max(1, round(sizes["nonmembers"] * n / given))
        return resized

    found = smallest_reaching(lambda n: rejection_rate(kind, scaled(n), effect, alpha, n_sim, assumptions),
                              power, 2, largest_scale * given, start=given)
    return None if found is None else found[0]
