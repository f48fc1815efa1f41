"""Determinism of scores and p-values, and exch's behaviour on a model that never saw the data."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from medexp.benchmarks import load_benchmark_from_config
from medexp.config import compose
from medexp.detectors import exch_detector
from medexp.models import load_scorer
from medexp.scoring import example_scores, shard_order_scores

pytestmark = pytest.mark.slow


def _setup(demo_cache, model, *overrides):
    cfg = compose([f"model={model}", *overrides])
    benchmark = load_benchmark_from_config(cfg.bench, demo_cache)
    scorer = functools.cache(lambda: load_scorer(cfg.model, demo_cache))
    return cfg, benchmark.examples, scorer


def test_two_scorings_from_scratch_are_identical(demo_cache, tmp_path):
    cfg, examples, _ = _setup(demo_cache, "demo_leaky", "detector.shards=6", "detector.permutations=8")
    runs = []
    for attempt in ("a", "b"):
        # A fresh scorer and an empty score cache: everything is recomputed.
        scorer = functools.cache(lambda: load_scorer(cfg.model, demo_cache))
        per_example = example_scores(scorer, {"model": "leaky"}, examples[:48], tmp_path / attempt)
        shards = shard_order_scores(scorer, {"model": "leaky"}, examples[:48], tmp_path / attempt, cfg.detector, 7)
        runs.append((per_example, shards, exch_detector(shards, cfg.detector, 48).metrics["p_value"]))
    pd.testing.assert_frame_equal(runs[0][0], runs[1][0], check_exact=True)
    pd.testing.assert_frame_equal(runs[0][1], runs[1][1], check_exact=True)
    assert runs[0][2] == runs[1][2]


@pytest.mark.extended
def test_exch_null_p_values_are_roughly_uniform(demo_cache, tmp_path):
    """The clean model on 24 random orders of the benchmark (none of which it saw)."""
    cfg, examples, scorer = _setup(demo_cache, "demo_clean", "detector.shards=12", "detector.permutations=15")
    p_values = []
    for seed in range(24):
        order = [examples[i] for i in np.random.default_rng(seed).permutation(len(examples))[:120]]
        table = shard_order_scores(scorer, {"model": "clean"}, order, tmp_path, cfg.detector, seed)
        p_values.append(exch_detector(table, cfg.detector, len(order)).metrics["p_value"])
    p_values = np.array(p_values)
    assert stats.kstest(p_values, "uniform").pvalue > 0.01
    assert np.mean(p_values < 0.05) <= 0.2  # 5% expected; 0.2 allows sampling noise at n = 24


@pytest.mark.extended
def test_demo_model_build_is_deterministic(tmp_path):
    from omegaconf import OmegaConf
    from safetensors.torch import load_file

    from medexp.config.schemas import DemoBenchConfig, DemoModelConfig
    from medexp.demo.models import demo_model_dir

    tiny = DemoModelConfig(train_epochs=1, hidden_size=32, bench=DemoBenchConfig(n_test=40, n_train=64))
    weights = []
    for attempt in ("a", "b"):
        directory = demo_model_dir(OmegaConf.structured(tiny), tmp_path / attempt)
        weights.append(load_file(directory / "model.safetensors"))
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        assert (weights[0][name] == weights[1][name]).all(), name


@pytest.mark.extended
def test_demo_model_weights_do_not_depend_on_the_callers_thread_count(tmp_path):
    import torch
    from omegaconf import OmegaConf
    from safetensors.torch import load_file

    from medexp.config.schemas import DemoBenchConfig, DemoModelConfig
    from medexp.demo.models import demo_model_dir

    tiny = DemoModelConfig(train_epochs=1, hidden_size=32, bench=DemoBenchConfig(n_test=40, n_train=64))
    previous = torch.get_num_threads()
    weights = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            directory = demo_model_dir(OmegaConf.structured(tiny), tmp_path / f"threads{threads}")
            weights.append(load_file(directory / "model.safetensors"))
            assert torch.get_num_threads() == threads  # the caller's setting is restored
    finally:
        torch.set_num_threads(previous)
    for name in weights[0]:
        assert torch.equal(weights[0][name], weights[1][name]), name
