"""Detector dataset_inference: features by hand, halves that never leak into the fit, the null
(p uniform over drawn worlds) and power (a model surer of its members is detected)."""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from medexp.detectors import dataset_inference_detector
from medexp.detectors.dataset_inference import membership_features
from tests.detectors.score_tables import dataset_inference_config, score_table


def test_features_by_hand():
    table = pd.DataFrame({
        "token_logprobs": [[-0.1, -2.0, -0.5, -1.0, -3.0], [-0.4]],
        "token_minkpp_z": [[1.0, -1.0, 0.5, 2.0, 0.0], [0.3]],
        "mean_logprob": [-1.32, -0.4],
        "sum_logprob": [-6.6, -0.4],
        "answer": ["left lung", "yes"],
    })
    features = membership_features(table, ["mean_logprob", "min_k", "min_k_pp", "zlib_ratio"], 40.0)
    # K = 40% of 5 tokens: the lowest 2 (-3.0, -2.0 and z -1.0, 0.0); of 1 token: that token
    assert features[:, 0].tolist() == [-1.32, -0.4]
    assert features[:, 1].tolist() == pytest.approx([-2.5, -0.4])
    assert features[:, 2].tolist() == pytest.approx([-0.5, 0.3])
    assert features[:, 3].tolist() == pytest.approx([-6.6 / len(zlib.compress(b"left lung")), -0.4 / len(zlib.compress(b"yes"))])


def test_half_b_never_enters_the_fit():
    rng = np.random.default_rng(0)
    members, nonmembers = score_table(rng, 40, "m", confidence=0.5), score_table(rng, 40, "n")
    cfg = dataset_inference_config()
    result = dataset_inference_detector(members, nonmembers, cfg, seed=3)
    table = result.table
    assert (table.groupby(["member", "half"]).size() == 20).all()  # 20 members and 20 non-members per half
    # rewrite half B's scores wildly: the fit (weights, intercept) is unchanged, only the test moves
    in_b = set(table.loc[table["half"] == "B", "example_id"])
    shuffled = [frame.assign(mean_logprob=np.where(frame["example_id"].isin(in_b), -50.0, frame["mean_logprob"]))
                for frame in (members, nonmembers)]
    again = dataset_inference_detector(*shuffled, cfg, seed=3)
    for name in ("intercept", "weight.mean_logprob", "weight.min_k", "weight.min_k_pp", "weight.zlib_ratio"):
        assert again.metrics[name] == pytest.approx(result.metrics[name]), name
    assert again.metrics["p_value"] != pytest.approx(result.metrics["p_value"])
    # the test is the Welch t-test of half B's scores
    b = table[table["half"] == "B"]
    welch = sps.ttest_ind(b.loc[b.member, "score"], b.loc[~b.member, "score"], equal_var=False, alternative="greater")
    assert result.metrics["p_value"] == pytest.approx(welch.pvalue) and result.metrics["statistic"] == pytest.approx(welch.statistic)
    # the halves are the cell seed's: another seed, other halves
    other = dataset_inference_detector(members, nonmembers, cfg, seed=4).table
    assert list(other["half"]) != list(table["half"])


def test_null_p_is_uniform():
    """Members and non-members from one distribution (the model saw neither) over 200 worlds."""
    p_values = []
    for seed in range(200):
        rng = np.random.default_rng(seed)
        result = dataset_inference_detector(score_table(rng, 40, "m"), score_table(rng, 40, "n"),
                                            dataset_inference_config(), seed)
        p_values.append(result.metrics["p_value"])
    p_values = np.asarray(p_values)
    rejections = int(np.sum(p_values < 0.05))
    assert sps.binomtest(rejections, 200, 0.05).pvalue > 0.001, rejections
    assert sps.kstest(p_values, "uniform").pvalue > 0.001


def test_power_a_model_surer_of_its_members_is_detected():
    flags = []
    for seed in range(20):
        rng = np.random.default_rng(1000 + seed)
        result = dataset_inference_detector(score_table(rng, 100, "m", confidence=0.7), score_table(rng, 100, "n"),
                                            dataset_inference_config(), seed)
        flags.append(result.metrics["flag"])
        assert result.metrics["mean_difference"] > 0 and result.metrics["cohens_d"] > 0
    assert np.mean(flags) >= 0.9
    # the MDE stated is the Welch formula's at half B's sizes
    assert result.metrics["n_members_half_b"] == 50 and np.isfinite(result.metrics["mde"])


def test_too_few_examples_are_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="at least 4 members and 4 non-members"):
        dataset_inference_detector(score_table(rng, 3, "m"), score_table(rng, 10, "n"), dataset_inference_config(), 0)
