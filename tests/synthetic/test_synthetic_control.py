"""control=synthetic: cohort score tables from the calibration model, run by the cohort detectors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from medexp.config import compose
from medexp.controls.synthetic import synthetic_cohort_scores, world_seed
from medexp.detectors import mink_tail_detector
from medexp.runner.evaluate import evaluate
from medexp.stats.calibration import draw_easiness
from tests.detectors.synthetic import false_positive_band
from tests.synthetic.world import HIGH_GAIN, LOW_GAIN, control, examples_with_easiness, mink_tail_config

SCORE_COLUMNS = ["example_id", "position", "n_answer_tokens", "token_logprobs", "token_minkpp_z", "sum_logprob",
                 "mean_logprob", "boundary_merged"]  # as medexp.models.hf.HFScorer.score_examples writes them


def _appendix_b_examples(seed: int, n: int = 1061):
    return examples_with_easiness(draw_easiness(n, 0.6, 900.0, np.random.default_rng(seed)).values)


def test_toy_world_delta_matches_a_hand_computation():
    """Three models, no noise: t = 2e + 1, a = e, b = 0.5e - 1 on e = 0, 1, 10, 100.

    Delta_t = t - median(a, b) = t - (a + b) / 2 = 1.25 e + 1.5 (Eq. 2: gain gap 2 - 0.75, offset
    gap 1 - (-0.5)) = 1.5, 2.75, 14, 126.5; Delta_a = a - (t + b) / 2 = -0.25 e.
    """
    toy = control({"t": {"gain": 2.0, "offset": 1.0}, "a": 1.0, "b": {"gain": 0.5, "offset": -1.0}}, noise_sd=0.0)
    examples = examples_with_easiness([0.0, 1.0, 10.0, 100.0])
    cohort = synthetic_cohort_scores(toy, examples, "t", seed=0)
    assert cohort.models == ["t", "a", "b"]
    table = cohort.tables["t"]
    assert list(table.columns) == SCORE_COLUMNS
    assert table["token_minkpp_z"].tolist() == [[1.0], [3.0], [21.0], [201.0]]
    assert table["sum_logprob"].tolist() == table["mean_logprob"].tolist() == [1.0, 3.0, 21.0, 201.0]
    assert set(table["n_answer_tokens"]) == {1} and not table["boundary_merged"].any()
    assert table["example_id"].tolist() == [ex.example_id for ex in examples]

    cfg = mink_tail_config(thresholds=[10.0, 100.0], flag_threshold=100.0, flag_fraction=0.2, strata=[])
    metrics = mink_tail_detector(cohort, cfg, seed=0).metrics
    assert metrics["delta_max"] == pytest.approx(126.5)
    assert metrics["delta_mean"] == pytest.approx((1.5 + 2.75 + 14 + 126.5) / 4)
    assert metrics["pr_delta_gt_10"] == 0.5 and metrics["pr_delta_gt_100"] == 0.25
    assert metrics["flag"] == 1.0  # 0.25 > 0.2
    low = mink_tail_detector(synthetic_cohort_scores(toy, examples, "a", seed=0), cfg, seed=0).metrics
    assert low["delta_max"] == pytest.approx(0.0) and low["delta_mean"] == pytest.approx(-0.25 * 111 / 4)


def test_one_world_per_simulation_whatever_the_target():
    appendix = control({"low": 0.05, "mid": 0.5, "high": 1.0})
    examples = examples_with_easiness(np.linspace(0, 50, 40))
    by_target = {target: synthetic_cohort_scores(appendix, examples, target, seed=11) for target in ("low", "high")}
    for model in ("low", "mid", "high"):
        pd.testing.assert_frame_equal(by_target["low"].tables[model], by_target["high"].tables[model])
    again = synthetic_cohort_scores(appendix, examples, "low", seed=11)
    other = synthetic_cohort_scores(appendix, examples, "low", seed=12)
    pd.testing.assert_frame_equal(again.tables["mid"], by_target["low"].tables["mid"])
    assert not np.array_equal(other.tables["mid"]["sum_logprob"], again.tables["mid"]["sum_logprob"])
    # A model's stream is named by the model: adding a cohort member changes nobody else's scores.
    larger = control({"low": 0.05, "mid": 0.5, "high": 1.0, "extra": 2.0})
    pd.testing.assert_frame_equal(synthetic_cohort_scores(larger, examples, "low", seed=11).tables["mid"],
                                  again.tables["mid"])

    cells = [compose(["bench=synthetic", "control=synthetic", "model=synthetic", f"model.name={name}", "seed=3"])
             for name in ("low_gain_a", "clean_baseline")]
    assert world_seed(cells[0]) == world_seed(cells[1])
    assert world_seed(compose(["bench=synthetic", "control=synthetic", "seed=4"])) != world_seed(cells[0])


def test_errors_name_the_problem():
    appendix = control({"a": 1.0, "b": 1.0})
    examples = examples_with_easiness([1.0, 2.0])
    with pytest.raises(ValueError, match=r"model.name='probe' is not in the synthetic cohort .*\['a', 'b'\]"):
        synthetic_cohort_scores(appendix, examples, "probe", seed=0)
    with pytest.raises(ValueError, match="control.cohort is empty"):
        synthetic_cohort_scores(control({}), examples, "a", seed=0)
    plain = [ex.__class__(ex.example_id, ex.position, None, "q", "a", meta={}) for ex in examples]
    with pytest.raises(ValueError, match=r"needs examples with an easiness \(bench=synthetic\): 2 of 2"):
        synthetic_cohort_scores(appendix, plain, "a", seed=0)
    with pytest.raises(ValueError, match="gain must be a positive number"):
        synthetic_cohort_scores(control({"a": 0.0, "b": 1.0}), examples, "a", seed=0)


AUDIT_MINK_TAIL = ("detector=mink_tail", "detector.thresholds=[50,100]", "detector.flag_threshold=100",
                   "detector.flag_fraction=0.05", "detector.strata=[answer_type]", "detector.n_permutations=2000")


def _cell(model: str, seed: int, detector=AUDIT_MINK_TAIL):
    """A cell of the Appendix B world through the runner's evaluate (control, hook, detector)."""
    cfg = compose(["bench=synthetic", "control=synthetic", "model=synthetic", f"model.name={model}", f"seed={seed}",
                   *detector])
    return evaluate(cfg, seed=1)


@pytest.mark.parametrize("seed", [0, 20260531])
def test_appendix_b_flags_every_high_gain_model_and_no_low_gain_one(seed):
    """The qualitative result of Appendix B (no contamination anywhere).

    For a high-gain target the other four gains are 0.05, 0.05, 1, 1, so the median is
    (0.05 e + e) / 2 and Delta = 0.475 e + noise: Pr[Delta > 100] = 0.4 P(Exp(900) > 100 / 0.475)
    = 0.4 exp(-100 / 427.5) = 0.3163; with 424 CLOSED items the count is Binomial(424, 0.7914),
    sd 8.4 items = 0.0079, so a 4-sd band is [0.285, 0.348] (the paper's 30.7% is inside).
    Delta_max = 0.475 max of 424 Exp(900): P(< 1500) ~ 3e-6, P(> 6000) ~ 3e-4 (paper: ~3,400).
    For a low-gain target the median of the others is 1 * e: Delta = -0.95 e + noise, never > 100.
    """
    results = {model: _cell(model, seed)[0] for model in LOW_GAIN + HIGH_GAIN}
    for model in LOW_GAIN:
        assert results[model]["pr_delta_gt_100"] == 0.0 and results[model]["flag"] == 0.0
        assert results[model]["p_value"] == 1.0  # no exceedance at all: every relabelling ties
    rates = [results[model]["pr_delta_gt_100"] for model in HIGH_GAIN]
    for model in HIGH_GAIN:
        metrics = results[model]
        assert 0.285 <= metrics["pr_delta_gt_100"] <= 0.348
        assert 1500 <= metrics["delta_max"] <= 6000
        assert metrics["flag"] == 1.0 and metrics["p_value"] < 0.01
        assert metrics["n_examples"] == 1061 and metrics["n_models"] == 5
    # Parity: the clean baseline and the two "suspects" differ only by noise near the threshold
    # (a few of the ~5 items whose 0.475 e lies within 3 of 100).
    assert max(rates) - min(rates) <= 0.01


@pytest.mark.extended
def test_the_other_cohort_detectors_run_on_synthetic_scores():
    """Table 5 from first principles: the clean baseline's top-25 equals a suspect's (Jaccard 1:
    the 25 largest easiness values are hundreds apart, the noise sd is 1), and the loss gap of
    a high-gain model is positive for the same calibration reason."""
    metrics, result = _cell("clean_baseline", 0, ["detector=topk_jaccard", "detector.rank_by=score",
                                                  "detector.top_k=25"])
    pairs = result.table.set_index(["model_a", "model_b"])
    assert pairs.loc[("clean_baseline", "high_gain_a"), "jaccard"] == 1.0
    assert pairs.loc[("clean_baseline", "high_gain_b"), "jaccard"] == 1.0
    assert metrics["p_value_hypergeometric"] < 1e-10 and metrics["flag"] == 1.0
    # the cohort-relabel test flags it too: its models differ in gain, so a random member's scores
    # in the baseline's place never share all 25 (no draw reaches the observed overlap); like
    # mink_tail's relabel test it does not remove the calibration confound
    assert metrics["p_value"] == 1 / (1 + metrics["n_permutations"])
    high, _ = _cell("high_gain_a", 0, ["detector=loss"])
    low, _ = _cell("low_gain_a", 0, ["detector=loss"])
    assert high["statistic"] > 0 and high["p_value"] < 0.01
    assert low["statistic"] < 0 and low["p_value"] > 0.5


def test_planted_contamination_is_detected_in_a_homogeneous_cohort():
    """Power: equal gains, the suspect memorised 10% of the examples (delta = 500), so Pr[Delta
    > 100] = 0.1 > 5% for it, while its clean peers in the same world stay at noise level."""
    models = {"suspect": {"gain": 1.0, "contaminated_fraction": 0.1}, **{f"clean_{i}": 1.0 for i in range(4)}}
    cfg = mink_tail_config(n_permutations=1000)
    for seed in range(5):
        examples = _appendix_b_examples(seed)
        suspect = mink_tail_detector(synthetic_cohort_scores(control(models), examples, "suspect", seed), cfg, seed)
        peer = mink_tail_detector(synthetic_cohort_scores(control(models), examples, "clean_0", seed), cfg, seed)
        assert suspect.metrics["pr_delta_gt_100"] == pytest.approx(106 / 1061)  # round(0.1 * 1061) items
        assert suspect.metrics["flag"] == 1.0 and suspect.metrics["p_value"] == pytest.approx(1 / 1001)
        assert peer.metrics["pr_delta_gt_100"] == 0.0 and peer.metrics["flag"] == 0.0


@pytest.mark.extended
def test_a_clean_homogeneous_cohort_is_not_flagged():
    """Null: equal gains and no contamination. The audit's flag never fires (Delta is noise of sd
    ~1.2 against a threshold of 100), and the cohort-relabel p-value of a noise-scale tail
    (Pr[Delta > 1.5]) is below alpha in about alpha of the worlds."""
    alpha, trials = 0.05, 200
    models = {f"clean_{i}": 1.0 for i in range(5)}
    audit = mink_tail_config(n_permutations=200, strata=[])
    noise_scale = mink_tail_config(thresholds=[1.5], flag_threshold=1.5, flag_fraction=0.5, alpha=alpha,
                                   n_permutations=400, strata=[])
    p_values = []
    for seed in range(trials):
        cohort = synthetic_cohort_scores(control(models), _appendix_b_examples(seed, n=300), "clean_0", seed)
        if seed < 20:
            assert mink_tail_detector(cohort, audit, seed).metrics["flag"] == 0.0
        p_values.append(mink_tail_detector(cohort, noise_scale, seed).metrics["p_value"])
    rate = float(np.mean(np.array(p_values) < alpha))
    low, high = false_positive_band(alpha, trials)
    assert low <= rate <= high, rate
