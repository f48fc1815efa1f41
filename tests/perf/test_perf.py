"""Performance suite (``python -m pytest -m perf tests/perf``): speed as ratios to a plain
baseline measured in the same run. Nothing here asserts wall time; each test asserts that the
fast path computes the same thing as its baseline and records the ratio in extra_info."""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy import stats as sps

pytestmark = pytest.mark.perf

N_EXAMPLES = 6_719  # PathVQA's test split, the largest exch_rank cell of the audit
N_PERMUTATIONS = 10_000


def _loop_rank_p(loglik: np.ndarray, n_permutations: int, seed: int) -> float:
    """The plain baseline: per loop iteration, one permutation and scipy's Spearman correlation."""
    earliness = np.arange(loglik.size - 1, -1, -1, dtype=np.float64)
    observed = sps.spearmanr(earliness, loglik).statistic
    rng = np.random.default_rng(seed)
    exceed = sum(
        sps.spearmanr(earliness, loglik[rng.permutation(loglik.size)]).statistic >= observed
        for _ in range(n_permutations)
    )
    return (1 + exceed) / (1 + n_permutations)


def _random_words_s(count: int, rounds: int = 5) -> float:
    """The engine's floor: the fastest of ``rounds`` draws of ``count`` 32-bit words from numpy's
    Generator, one call each (Fisher-Yates needs n - 1 words per permutation)."""
    rng = np.random.default_rng(2)
    fastest = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        rng.integers(0, 1 << 32, size=count, dtype=np.uint32)
        fastest = min(fastest, time.perf_counter() - started)
    return fastest


def test_permutation_engine_vs_loop_and_its_random_words(benchmark):
    from medexp.stats import rank_exchangeability

    loglik = np.random.default_rng(0).normal(size=N_EXAMPLES) + np.linspace(0.02, -0.02, N_EXAMPLES)
    started = time.perf_counter()
    baseline_p = _loop_rank_p(loglik, N_PERMUTATIONS, seed=1)
    baseline_s = time.perf_counter() - started
    # The warm-up round compiles the kernel (or loads it from numba's cache): not part of the rate.
    result = benchmark.pedantic(rank_exchangeability, args=(loglik, N_PERMUTATIONS, 1), rounds=3, iterations=1,
                                warmup_rounds=1)
    floor_s = _random_words_s(N_PERMUTATIONS * (N_EXAMPLES - 1))
    # Different permutation streams: the two p-values agree within Monte Carlo error.
    assert abs(result.p_value - baseline_p) < 4 * np.sqrt(baseline_p * (1 - baseline_p) / N_PERMUTATIONS) + 1e-3
    engine = benchmark.stats.stats
    benchmark.extra_info.update(baseline_loop_s=baseline_s, speedup_vs_loop=baseline_s / engine.mean,
                                random_words_s=floor_s, ratio_to_random_words=engine.min / floor_s)
    print(f"\npermutation engine: {engine.mean:.3f} s (fastest {engine.min:.3f} s), loop {baseline_s:.3f} s, "
          f"speed-up x{baseline_s / engine.mean:.1f}; its random words alone {floor_s:.3f} s, "
          f"fastest engine round / words x{engine.min / floor_s:.2f}")


def _devices() -> list[str]:
    import torch

    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


@pytest.fixture(scope="module")
def demo_setup(tmp_path_factory):
    """A function building the clean demo model's scorer with settings, and 128 demo examples."""
    from medexp.benchmarks import load_benchmark_from_config
    from medexp.config import compose
    from medexp.models import load_scorer

    cache = tmp_path_factory.mktemp("perf-cache")

    def scorer(device: str, **settings):
        overrides = [f"model.{key}={value}" for key, value in {"device": device, **settings}.items()]
        return load_scorer(compose(["model=demo_clean", *overrides]).model, cache)

    examples = load_benchmark_from_config(compose([]).bench, cache).examples[:128]
    return scorer, examples


def _examples_per_s(scorer, examples) -> tuple[float, object]:
    started = time.perf_counter()
    frame = scorer.score_examples(examples)
    return len(examples) / (time.perf_counter() - started), frame


@pytest.mark.parametrize("device", _devices())
def test_batched_scoring_vs_one_at_a_time(benchmark, demo_setup, device):
    """Examples per second scored one at a time (the baseline), in batches of 32 (benchmarked) and
    in batches formed by a token budget; on the CPU, and on the GPU when there is one."""
    make, examples = demo_setup
    single_rate, one_at_a_time = _examples_per_s(make(device, batch_size=1), examples)
    budget_rate, budgeted = _examples_per_s(make(device, token_budget=4096), examples)
    batched = benchmark.pedantic(make(device, batch_size=32).score_examples, args=(examples,), rounds=3, iterations=1)
    for frame in (batched, budgeted):
        np.testing.assert_allclose(frame["sum_logprob"], one_at_a_time["sum_logprob"], atol=1e-4)
    batched_rate = len(examples) / benchmark.stats.stats.mean
    benchmark.extra_info.update(device=device, examples_per_s_single=single_rate, examples_per_s_batched=batched_rate,
                                examples_per_s_token_budget=budget_rate, speedup_vs_single=batched_rate / single_rate,
                                budget_speedup_vs_single=budget_rate / single_rate)
    print(f"\nscoring on {device}: one at a time {single_rate:.0f} ex/s, batches of 32 {batched_rate:.0f} ex/s "
          f"(x{batched_rate / single_rate:.1f}), token budget 4096 {budget_rate:.0f} ex/s (x{budget_rate / single_rate:.1f})")
