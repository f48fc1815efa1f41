"""The exchangeability detectors log their minimum detectable effect: exch_rank Spearman's rho at
its n examples, exch Cohen's d at its n shards (power 0.8, the cell's alpha); the p-values are
the tests' own and do not depend on it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from medexp.config.schemas.exchangeability import ExchConfig, ExchRankConfig
from medexp.detectors.exch import exch_detector
from medexp.detectors.exch_rank import exch_rank_detector
from medexp.stats.sample_size import one_sample_t_mde, spearman_mde


def test_exch_rank_logs_the_rho_it_could_detect():
    rng = np.random.default_rng(0)
    n = 120
    logprob = rng.normal(-30, 5, n)
    scores = pd.DataFrame({"example_id": [f"e{i}" for i in range(n)], "position": np.arange(n),
                           "n_answer_tokens": 3, "sum_logprob": logprob, "mean_logprob": logprob / 3})
    cfg = OmegaConf.structured(ExchRankConfig(name="exch_rank", family="exch_rank", n_permutations=200, alpha=0.05))
    metrics = exch_rank_detector(scores, cfg, seed=1).metrics
    assert metrics["mde"] == pytest.approx(spearman_mde(120, 0.05))
    small = exch_rank_detector(scores.head(3), cfg, seed=1).metrics
    assert np.isnan(small["mde"])  # Fisher's z needs four examples: no MDE, the cell still runs


def test_exch_logs_the_cohens_d_it_could_detect():
    rng = np.random.default_rng(1)
    rows = [{"shard": shard, "permutation": permutation, "loglik": rng.normal(-100, 1)}
            for shard in range(10) for permutation in range(6)]
    cfg = OmegaConf.structured(ExchConfig(name="exch", family="exch", shards=10, permutations=5))
    metrics = exch_detector(pd.DataFrame(rows), cfg, n_examples=40).metrics
    assert metrics["mde"] == pytest.approx(one_sample_t_mde(10, cfg.alpha))
