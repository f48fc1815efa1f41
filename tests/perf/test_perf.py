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
    """The plain baseline: one permutation and one Spearman dot product per loop iteration."""
    ranks = sps.rankdata(loglik)
    earliness = np.arange(loglik.size - 1, -1, -1, dtype=np.float64)
    observed = ranks @ earliness
    rng = np.random.default_rng(seed)
    exceed = sum(ranks[rng.permutation(loglik.size)] @ earliness >= observed for _ in range(n_permutations))
    return (1 + exceed) / (1 + n_permutations)


def test_permutation_engine_vs_loop(benchmark):
    from medexp.stats import rank_exchangeability

    loglik = np.random.default_rng(0).normal(size=N_EXAMPLES) + np.linspace(0.02, -0.02, N_EXAMPLES)
    started = time.perf_counter()
    baseline_p = _loop_rank_p(loglik, N_PERMUTATIONS, seed=1)
    baseline_s = time.perf_counter() - started
    result = benchmark.pedantic(rank_exchangeability, args=(loglik, N_PERMUTATIONS, 1), rounds=3, iterations=1)
    # Different permutation streams: the two p-values agree within Monte Carlo error.
    assert abs(result.p_value - baseline_p) < 4 * np.sqrt(baseline_p * (1 - baseline_p) / N_PERMUTATIONS) + 1e-3
    benchmark.extra_info["baseline_loop_s"] = baseline_s
    benchmark.extra_info["speedup_vs_loop"] = baseline_s / benchmark.stats.stats.mean
    print(f"\npermutation engine: {benchmark.stats.stats.mean:.3f} s, loop {baseline_s:.3f} s, "
          f"speed-up x{baseline_s / benchmark.stats.stats.mean:.1f}")


@pytest.fixture(scope="module")
def demo_scorers(tmp_path_factory):
    """The clean demo model with batch size 1 and 32, and 128 demo examples."""
    import medexp  # noqa: F401
    from medexp.benchmarks import load_benchmark_from_config
    from medexp.config import compose
    from medexp.models import load_scorer

    cache = tmp_path_factory.mktemp("perf-cache")
    scorers = {
        size: load_scorer(compose(["model=demo_clean", "model.device=cpu", f"model.batch_size={size}"]).model, cache)
        for size in (1, 32)
    }
    examples = load_benchmark_from_config(compose([]).bench, cache).examples[:128]
    return scorers, examples


def test_batched_scoring_vs_one_at_a_time(benchmark, demo_scorers):
    scorers, examples = demo_scorers
    started = time.perf_counter()
    one_at_a_time = scorers[1].score_examples(examples)
    baseline_s = time.perf_counter() - started
    batched = benchmark.pedantic(scorers[32].score_examples, args=(examples,), rounds=3, iterations=1)
    np.testing.assert_allclose(batched["sum_logprob"], one_at_a_time["sum_logprob"], atol=1e-5)
    mean_s = benchmark.stats.stats.mean
    benchmark.extra_info["examples_per_s_batched"] = len(examples) / mean_s
    benchmark.extra_info["examples_per_s_single"] = len(examples) / baseline_s
    benchmark.extra_info["speedup_vs_single"] = baseline_s / mean_s
    print(f"\nscoring: batched {len(examples) / mean_s:.0f} ex/s, one at a time {len(examples) / baseline_s:.0f} ex/s, "
          f"speed-up x{baseline_s / mean_s:.1f}")
