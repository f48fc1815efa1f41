"""Simulated MDEs (medexp.detectors.power_simulation): each simulated test holds its level at
effect 0, its MDE falls with n, and for image_nn and topk_jaccard, whose power has a closed form
under the simulated model, the simulation matches the hand computation."""

from __future__ import annotations

import math

import pytest
from omegaconf import OmegaConf
from scipy.stats import betabinom, hypergeom

from medexp.detectors.image_nn import flag_count_p_value, null_rank
from medexp.detectors.power_simulation import (
    SIMULATED_TESTS,
    rejection_rate,
    simulated_kind,
    simulated_mde,
    simulated_n,
    simulation_permutations,
)
from medexp.detectors import declarations
from medexp.detectors.declaration import Simulated

SMALL = {
    "mink_tail": {"examples": 150, "models": 4},
    "loss": {"examples": 150, "models": 4},
    "topk_jaccard": {"examples": 150, "models": 4, "top_k": 10, "rank_by_delta": 1},
    "topk_jaccard_hypergeometric": {"examples": 150, "models": 4, "top_k": 10, "rank_by_delta": 1},
    "image_nn": {"images": 150, "calibration": 600, "tau_alpha": 0.05},
    "memorization": {"members": 100, "nonmembers": 100},
}


def test_every_kind_without_a_formula_but_with_a_test_is_simulated():
    # topk_jaccard is simulated under each of its nulls (detector.null: relabel, hypergeometric)
    simulated = {declaration.name for declaration in declarations() if isinstance(declaration.power, Simulated)}
    assert set(SIMULATED_TESTS) == simulated | {"topk_jaccard_hypergeometric"}
    assert simulated_kind("topk_jaccard", OmegaConf.create({"null": "hypergeometric"})) == "topk_jaccard_hypergeometric"
    assert simulated_kind("topk_jaccard", OmegaConf.create({"null": "relabel"})) == "topk_jaccard"


def test_the_permutations_resolve_a_fifth_of_alpha():
    assert simulation_permutations(0.01) == 499 and simulation_permutations(0.05) == 99
    assert 1 / (simulation_permutations(0.001) + 1) <= 0.001 / 5


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_each_simulated_test_holds_its_level_at_effect_zero(kind):
    # 400 draws at alpha 0.05: the Monte Carlo SE of a rate of 0.05 is 0.011; allow 3 SE
    rate = rejection_rate(kind, SMALL[kind], 0.0, 0.05, n_sim=400, seed=11)
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 400)


@pytest.mark.parametrize("kind", ["topk_jaccard", "topk_jaccard_hypergeometric"])
def test_topk_ranked_by_score_holds_its_level_too(kind):
    rate = rejection_rate(kind, {**SMALL[kind], "rank_by_delta": 0}, 0.0, 0.05, n_sim=400, seed=3)
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 400)


def test_the_relabel_null_asks_for_more_shared_examples_than_the_hypergeometric_one():
    """The relabel null moves the leaky pair's lift between the models, so the target's largest
    overlap under it is not a uniformly random K-set's: the same overlap is less surprising
    (measured at 400 examples, 4 models, K=10, alpha 0.05: 4 shared examples against 3)."""
    sizes = {"examples": 400, "models": 4, "top_k": 10, "rank_by_delta": 1}
    relabel = simulated_mde("topk_jaccard", sizes, 0.05, n_sim=60).mde
    hypergeometric = simulated_mde("topk_jaccard_hypergeometric", sizes, 0.05, n_sim=60).mde
    assert hypergeometric < relabel <= sizes["top_k"]
    assert rejection_rate("topk_jaccard", sizes, sizes["top_k"], 0.05, n_sim=30) == 1.0  # a whole shared top-K


def test_the_mde_falls_with_n():
    small = simulated_mde("loss", {"examples": 60, "models": 4}, 0.05, n_sim=120).mde
    large = simulated_mde("loss", {"examples": 240, "models": 4}, 0.05, n_sim=120).mde
    # a mean over 4 times the examples: about half the MDE
    assert 0.35 < large / small < 0.7
    few = simulated_mde("image_nn", {"images": 50, "calibration": 600, "tau_alpha": 0.05}, 0.05, n_sim=120).mde
    many = simulated_mde("image_nn", {"images": 400, "calibration": 600, "tau_alpha": 0.05}, 0.05, n_sim=120).mde
    assert many < few


def test_the_n_an_effect_needs_reaches_the_power_and_one_fewer_does_not_by_much():
    sizes = {"examples": 100, "models": 4}
    needed = simulated_n("loss", sizes, 0.5, 0.05, n_sim=120)
    assert needed is not None and needed < 100  # the MDE at 100 examples is below 0.5 (about 0.42)
    assert rejection_rate("loss", {**sizes, "examples": needed}, 0.5, 0.05, n_sim=120) >= 0.8
    with pytest.raises(ValueError, match="not the lever"):
        simulated_n("topk_jaccard", SMALL["topk_jaccard"], 3, 0.05, n_sim=10)


def image_nn_power(copies: int, n: int, m: int, tau_alpha: float, alpha: float) -> float:
    """Exact power: flagged = copies + Y, Y ~ BetaBinom(n - copies, k, m - k + 1) (the detector's null law
    for the non-copies); the test rejects from the smallest count whose p-value is below alpha."""
    k = null_rank(tau_alpha, m)
    critical = next(x for x in range(n + 1) if flag_count_p_value(x, n, m, k) < alpha)
    return float(betabinom.sf(critical - copies - 1, n - copies, k, m - k + 1))


def test_image_nn_matches_its_exact_power():
    n, m, tau_alpha, alpha, draws = 120, 800, 0.02, 0.01, 600
    sizes = {"images": n, "calibration": m, "tau_alpha": tau_alpha}
    hand = next(copies for copies in range(n + 1) if image_nn_power(copies, n, m, tau_alpha, alpha) >= 0.8)
    for copies in (hand - 1, hand):
        exact = image_nn_power(copies, n, m, tau_alpha, alpha)
        simulated = rejection_rate("image_nn", sizes, copies / n, alpha, n_sim=draws)
        assert abs(simulated - exact) < 3 * math.sqrt(exact * (1 - exact) / draws) + 1e-9
    # the bisection lands on the hand-computed count, or next to it where the power there is within MC error of 0.8
    found = simulated_mde("image_nn", sizes, alpha, n_sim=draws).mde * n
    assert round(found) in (hand - 1, hand, hand + 1)
    if round(found) != hand:
        assert abs(image_nn_power(round(found), n, m, tau_alpha, alpha) - 0.8) < 3 * math.sqrt(0.16 / draws)


def topk_power(shared: int, n: int, k: int, references: int, alpha: float) -> float:
    """Exact power under the topk_jaccard model ranked by score: the leaky pair overlaps on the shared
    examples plus X ~ Hypergeom(n - shared, k - shared, k - shared), each clean pair on Y ~ Hypergeom(n, k, k);
    the cell rejects when the Bonferroni-corrected smallest pair p is below alpha."""
    critical = next(i for i in range(k + 1) if min(1.0, references * hypergeom.sf(i - 1, n, k, k)) < alpha)
    leaky_misses = hypergeom.cdf(critical - shared - 1, n - shared, k - shared, k - shared) if shared < critical else 0.0
    clean_misses = hypergeom.cdf(critical - 1, n, k, k)
    return float(1 - leaky_misses * clean_misses ** (references - 1))


def test_topk_jaccard_hypergeometric_matches_its_exact_power():
    n, k, models, alpha, draws = 120, 10, 4, 0.01, 600
    sizes = {"examples": n, "models": models, "top_k": k, "rank_by_delta": 0}
    for shared in range(0, 4):
        exact = topk_power(shared, n, k, models - 1, alpha)
        simulated = rejection_rate("topk_jaccard_hypergeometric", sizes, shared, alpha, n_sim=draws)
        assert abs(simulated - exact) < 3 * math.sqrt(max(exact * (1 - exact), 1e-3) / draws), shared
    hand = next(shared for shared in range(k + 1) if topk_power(shared, n, k, models - 1, alpha) >= 0.8)
    assert simulated_mde("topk_jaccard_hypergeometric", sizes, alpha, n_sim=draws).mde == hand


def test_an_effect_beyond_the_search_is_nan_not_a_number():
    # two members and two non-members: 6 relabellings, so no permutation p-value falls below 1/6
    result = simulated_mde("memorization", {"members": 2, "nonmembers": 2}, 0.05, n_sim=5)
    assert math.isnan(result.mde) and result.null_rate == 0.0


def test_draws_are_reproducible():
    first = rejection_rate("mink_tail", SMALL["mink_tail"], 0.05, 0.05, n_sim=30)
    assert first == rejection_rate("mink_tail", SMALL["mink_tail"], 0.05, 0.05, n_sim=30)
    assert 0 < first < 1  # a rate that another seed could change
