"""detector=composition_sweep (Appendix B, Fig. 7b) and the descriptive result it returns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from medexp.benchmarks.synthetic import easiness_sampler
from medexp.config import compose
from medexp.detectors import DetectorResult, composition_sweep_detector
from medexp.runner.cell_run import CellOutcome
from medexp.runner.evaluate import evaluate
from tests.synthetic.world import fixed_easiness, sweep_config


def test_noise_free_sweep_matches_eq_2_by_hand():
    """Probe and two anchors of gain 1, outliers of gain 0.05, no noise, e = 0, 50, 150, 250, 1000.

    Median gain of the probe's references: k=0 [1, 1] -> 1, k=1 [1, 1, .05] -> 1, k=2 -> (0.05 + 1) / 2
    = 0.525, k>=3 -> 0.05. Delta = (1 - median gain) e: k<2 zero; k=2 0.475 e > 100 for e = 250, 1000
    (2/5); k>=3 0.95 e > 100 for e = 150, 250, 1000 (3/5). Flag at Pr > 0.5: only k >= 3.
    """
    cfg = sweep_config(draws=3, flag_fraction=0.5)
    result = composition_sweep_detector(fixed_easiness([0.0, 50.0, 150.0, 250.0, 1000.0]), cfg, 0.0, seed=0)
    assert result.descriptive
    table = result.table.set_index("k")
    assert table["n_models"].tolist() == [3, 4, 5, 6, 7]
    np.testing.assert_allclose(table["pr_delta_gt_100_mean"], [0, 0, 0.4, 0.6, 0.6])
    np.testing.assert_allclose(table["delta_max_mean"], [0, 0, 475, 950, 950])
    assert table["flagged"].tolist() == [0, 0, 0, 3, 3] and table["draws"].tolist() == [3] * 5
    metrics = result.metrics
    assert [metrics[f"false_positive_flag_prob_{k}"] for k in range(5)] == [0, 0, 0, 1, 1]
    assert metrics["pr_delta_gt_100_mean_2"] == pytest.approx(0.4)
    assert metrics["n_examples"] == 5 and metrics["draws"] == 3
    assert len(result.extra_tables["per_draw"]) == 15
    assert set(result.figures) == {"composition_sweep"}


@pytest.mark.parametrize("seed", [0, 20260531])
def test_a_clean_probe_is_flagged_exactly_when_the_cohort_has_two_low_gain_outliers(seed):
    """Appendix B: false-positive flag probability 0 for k < 2 and 1 for k >= 2 over 200 draws.

    k < 2: Delta is noise (sd ~1.2) against 100. k = 2: Pr[Delta > 100] ~ 0.316, k >= 3:
    0.4 exp(-100 / 855) = 0.356, each with sd ~0.008 per draw, far above 5%.
    """
    sampler = easiness_sampler(compose(["bench=synthetic"]).bench.synthetic)
    result = composition_sweep_detector(sampler, sweep_config(), 1.0, seed)
    probs = [result.metrics[f"false_positive_flag_prob_{k}"] for k in range(5)]
    assert probs == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert result.metrics["pr_delta_gt_100_mean_0"] == result.metrics["pr_delta_gt_100_mean_1"] == 0.0
    assert abs(result.metrics["pr_delta_gt_100_mean_2"] - 0.4 * np.exp(-100 / 427.5)) < 0.004  # 200 draws: se 0.0006
    assert abs(result.metrics["pr_delta_gt_100_mean_3"] - 0.4 * np.exp(-100 / 855.0)) < 0.004
    assert result.metrics["n_examples"] == 1061


def test_the_sweep_is_deterministic_and_the_seed_matters():
    sampler = easiness_sampler(compose(["bench=synthetic"]).bench.synthetic)
    cfg = sweep_config(draws=5, max_outliers=2)
    first = composition_sweep_detector(sampler, cfg, 1.0, seed=4)
    again = composition_sweep_detector(sampler, cfg, 1.0, seed=4)
    other = composition_sweep_detector(sampler, cfg, 1.0, seed=5)
    pd.testing.assert_frame_equal(first.extra_tables["per_draw"], again.extra_tables["per_draw"])
    assert not first.extra_tables["per_draw"]["delta_max"].equals(other.extra_tables["per_draw"]["delta_max"])
    assert first.table["k"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("overrides, message", [
    ({"n_anchors": 1}, "n_anchors must be at least 2"),
    ({"max_outliers": -1}, "max_outliers must be >= 0"),
    ({"draws": 0}, "draws must be at least 1"),
    ({"flag_fraction": 1.0}, r"flag_fraction must be in \[0, 1\)"),
    ({"outlier_gain": 0.0}, "gain must be a positive number"),
])
def test_bad_sweep_settings_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        composition_sweep_detector(fixed_easiness([1.0, 2.0, 3.0]), sweep_config(**{"draws": 1, **overrides}), 1.0, 0)


def test_descriptive_results_need_no_p_value_but_tests_still_do():
    assert DetectorResult({"n_examples": 3.0}, descriptive=True).descriptive
    with pytest.raises(ValueError, match=r"lacks required metrics \['n_examples'\]"):
        DetectorResult({"draws": 3.0}, descriptive=True)
    with pytest.raises(ValueError, match=r"lacks required metrics \['flag', 'p_value', 'statistic'\]"):
        DetectorResult({"n_examples": 3.0})


def test_descriptive_cells_print_their_metrics_instead_of_a_p_value():
    key = "model=probe,bench=synthetic,detector=composition_sweep,control=synthetic"
    line = CellOutcome(key, "abc", "FINISHED", {"false_positive_flag_prob_0": 0.0, "n_examples": 1061.0}).summary()
    assert line == f"{key}  descriptive  false_positive_flag_prob_0=0  n_examples=1061  run_id=abc"
    tested = CellOutcome(key, "abc", "CACHED", {"p_value": 0.5, "flag": 1.0}).summary()
    assert "p_value=0.5  flag=True  run_id=abc" in tested and "tracked earlier" in tested


def test_the_sweep_runs_only_under_the_synthetic_control(tmp_path):
    cfg = compose(["bench=synthetic", "control=synthetic", "model=synthetic", "detector=composition_sweep",
                   "detector.draws=4", "seed=0"])
    metrics, result = evaluate(cfg, seed=1)
    assert metrics["false_positive_flag_prob_2"] == 1.0 and metrics["false_positive_flag_prob_1"] == 0.0
    assert result.table_name == "per_outlier_count"
    with pytest.raises(ValueError, match="runs only under control=synthetic .*not control=none"):
        evaluate(compose(["bench=synthetic", "control=none", "model=synthetic", "detector=composition_sweep"]), 1)
    (tmp_path / "test.jsonl").write_text('{"id": 1, "question": "q", "answer": "a"}\n')
    with pytest.raises(ValueError, match="bench=local has no `synthetic:` section"):
        evaluate(compose(["bench=local", f"bench.root={tmp_path}", "control=synthetic", "model=synthetic",
                          "detector=composition_sweep"]), 1)
