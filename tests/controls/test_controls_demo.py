"""The controls on the offline demo, end to end (CLI for a few cells, ``run_cell`` for the rest).

demo_clean_c, the demo's stand-in baseline, is built on first use (the session cache builds
demo_clean and demo_leaky).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from medexp.benchmarks import load_benchmark_from_config
from medexp.kernel.cell import Cell
from medexp.config import compose, model_config
from medexp.controls.images import without_images
from medexp.controls.ordering import order_spearman
from medexp.detectors import CohortScores, mink_tail_detector
from medexp.models import load_scorer
from medexp.models.keys import model_cache_key
from medexp.runner.cell_run import run_cell
from medexp.scoring import example_scores
from medexp.stats import rank_exchangeability
from tests.conftest import parse_summary, run_medexp
from tests.controls.helpers import sha1

pytestmark = pytest.mark.slow


def _cli(demo_cache, tracking_uri, *overrides):
    result = run_medexp(f"paths.cache_dir={demo_cache}", f"tracking.uri={tracking_uri}", *overrides)
    assert result.returncode == 0, result.stderr[-3000:]
    run = MlflowClient(tracking_uri).get_run(parse_summary(result.stdout)["run_id"])
    assert run.info.status == "FINISHED"
    return run


def _cell(demo_cache, tracking_uri, *overrides):
    """One cell in this process, exactly as ``python -m medexp`` runs it."""
    outcome = run_cell(compose([f"paths.cache_dir={demo_cache}", f"tracking.uri={tracking_uri}", *overrides]))
    assert outcome.status == "FINISHED", outcome.error
    return outcome


def _table(tracking_uri, run_id, name):
    return pd.read_parquet(MlflowClient(tracking_uri).download_artifacts(run_id, name))


def _scores(demo_cache, model, examples):
    """A model's per-example score table through the score cache (filled by the cells above)."""
    cfg = model_config(model)
    scorer = functools.cache(lambda: load_scorer(cfg, demo_cache))
    return example_scores(scorer, model_cache_key(cfg, demo_cache), examples, demo_cache)


@pytest.mark.extended
def test_negative_demo_ood_flags_nothing_at_the_demo_cells_tau(demo_cache, tracking_uri):
    demo = _cli(demo_cache, tracking_uri, "detector=image_nn").data.metrics
    ood = _cli(demo_cache, tracking_uri, "detector=image_nn", "control=negative_demo_ood").data.metrics
    assert demo["n_images_flagged"] > 0  # the planted copies: tau separates something on the benchmark
    assert ood["tau"] == demo["tau"] and ood["corpus_n_images"] == demo["corpus_n_images"]
    assert ood["n_examples"] == 300 and ood["n_images_flagged"] == 0 and ood["flag"] == 0.0


@pytest.mark.extended
def test_external_baseline_exch_rank_equals_the_baselines_own_cell(demo_cache, tracking_uri):
    """A baseline runs with the seed of its own cell under the same control, so its metrics equal
    that cell's exactly; under control=none the cell key, hence the permutation seed, differs:
    the statistic (no randomness) is equal, the p-value is another permutation draw."""
    leaky = _cli(demo_cache, tracking_uri, "detector=exch_rank", "control=external_baseline_demo")
    direct = _cli(demo_cache, tracking_uri, "model=demo_clean_c", "detector=exch_rank", "control=external_baseline_demo")
    released = _cell(demo_cache, tracking_uri, "model=demo_clean_c", "detector=exch_rank")
    lm, dm, rm = leaky.data.metrics, direct.data.metrics, released.metrics
    for metric in ("p_value", "statistic", "n_exceed", "permutation_seed", "flag", "null_mean"):
        assert lm[f"baseline_demo_clean_c_{metric}"] == dm[metric], metric
    assert dm["permutation_seed"] == int(direct.data.tags["medexp.seed"])
    assert dm["n_baselines"] == 0  # its only baseline is itself: no baseline metrics
    assert not any(key.startswith("baseline_") for key in dm)
    assert rm["statistic"] == dm["statistic"] and rm["permutation_seed"] != dm["permutation_seed"]
    # The cell's own result is the plain exch_rank of demo_leaky under its seed.
    per_example = _table(tracking_uri, leaky.info.run_id, "per_example.parquet")
    redo = rank_exchangeability(per_example["sum_logprob"].to_numpy(), 10_000, int(leaky.data.tags["medexp.seed"]))
    assert redo.p_value == lm["p_value"]
    baselines = _table(tracking_uri, leaky.info.run_id, "baselines.parquet")
    assert baselines["model"].tolist() == ["demo_clean_c"]
    assert baselines["p_value"].tolist() == [dm["p_value"]]
    assert lm["n_baselines"] == 1 and lm["baselines_min_p_value"] == dm["p_value"]


@pytest.mark.extended
def test_external_baseline_joins_the_mink_tail_cohort_and_gets_its_own_metrics(demo_cache, tracking_uri):
    cohort = ("detector=mink_tail", "detector.cohort=[demo_clean,demo_leaky]")
    # Without the baseline demo_leaky has a single reference, too few for mink_tail.
    alone = run_cell(compose([f"paths.cache_dir={demo_cache}", f"tracking.uri={tracking_uri}", *cohort]))
    assert alone.status == "FAILED" and "needs at least 2 reference models" in alone.error
    outcome = _cell(demo_cache, tracking_uri, *cohort, "control=external_baseline_demo")
    metrics = outcome.metrics
    assert metrics["n_models"] == 3 and metrics["baseline_demo_clean_c_n_models"] == 3

    # Both results again from the cached score tables, by hand.
    cfg = compose([f"paths.cache_dir={demo_cache}", *cohort, "control=external_baseline_demo"])
    benchmark = load_benchmark_from_config(cfg.bench, demo_cache)
    def cohort(*names):  # the target, then detector.cohort in order, then the additions
        return CohortScores(names[0], {name: _scores(demo_cache, name, benchmark.examples) for name in names})

    own = mink_tail_detector(cohort("demo_leaky", "demo_clean", "demo_clean_c"), cfg.detector,
                             Cell.from_config(cfg).seed(0), benchmark.frame())
    baseline_seed = Cell("demo_clean_c", "demo", "mink_tail", "external_baseline_demo").seed(0)
    baseline = mink_tail_detector(cohort("demo_clean_c", "demo_clean", "demo_leaky"), cfg.detector, baseline_seed,
                                  benchmark.frame())
    for metric in ("p_value", "delta_max", "pr_delta_gt_1", "delta_q99", "flag"):
        assert metrics[metric] == own.metrics[metric], metric
        assert metrics[f"baseline_demo_clean_c_{metric}"] == baseline.metrics[metric], metric
    strata = _table(tracking_uri, outcome.run_id, "baselines/demo_clean_c/per_stratum.parquet")
    pd.testing.assert_frame_equal(strata, baseline.table, check_dtype=False)


def test_blind_image_scores_differ_and_are_cached_apart(demo_cache, tmp_path):
    benchmark = load_benchmark_from_config(compose([]).bench, demo_cache)
    released = benchmark.examples[:64]
    cfg = model_config("demo_leaky")
    scorer = functools.cache(lambda: load_scorer(cfg, demo_cache))
    key = model_cache_key(cfg, demo_cache)
    imaged = example_scores(scorer, key, released, tmp_path)
    blind = example_scores(scorer, key, without_images(released), tmp_path)
    assert imaged["example_id"].tolist() == blind["example_id"].tolist()
    assert (imaged["sum_logprob"] != blind["sum_logprob"]).mean() > 0.9
    assert len([entry for entry in (tmp_path / "scores").iterdir() if entry.is_dir()]) == 2


@pytest.mark.parametrize("model", ["demo_leaky", "demo_clean"])
@pytest.mark.extended
def test_score_orders_are_the_hand_computed_orders(demo_cache, tracking_uri, model):
    benchmark = load_benchmark_from_config(compose([]).bench, demo_cache)
    scores = _scores(demo_cache, model, benchmark.examples)
    from medexp.detectors.cohort import min_k_scores

    keys = {
        "order_answer_len": dict(zip(scores["example_id"], scores["n_answer_tokens"])),
        "order_mink": dict(zip(scores["example_id"], min_k_scores(scores["token_minkpp_z"], 20.0))),
    }
    for control, value in keys.items():
        outcome = _cell(demo_cache, tracking_uri, f"model={model}", "detector=exch_rank", f"control={control}")
        table = _table(tracking_uri, outcome.run_id, "per_example.parquet")
        expected = sorted(value, key=lambda example_id: (value[example_id], sha1(example_id)))
        assert table["example_id"].tolist() == expected
        positions = table["position"].to_numpy()
        assert outcome.metrics["control_order_spearman"] == pytest.approx(
            1 - 6 * np.sum((np.argsort(np.argsort(positions)) - np.arange(400)) ** 2) / (400 * (400**2 - 1)))
        redo = rank_exchangeability(table["sum_logprob"].to_numpy(), 10_000, int(outcome.metrics["permutation_seed"]))
        assert redo.p_value == outcome.metrics["p_value"]
    released = _cell(demo_cache, tracking_uri, f"model={model}", "detector=exch_rank")
    assert released.metrics["control_order_spearman"] == 1.0
    hashed = _cell(demo_cache, tracking_uri, f"model={model}", "detector=exch_rank", "control=order_hash")
    hashed_order = sorted(benchmark.examples, key=lambda ex: sha1(ex.example_id))
    assert hashed.metrics["control_order_spearman"] == order_spearman(hashed_order)


@pytest.mark.extended
def test_exch_runs_under_order_answer_len(demo_cache, tracking_uri):
    outcome = _cell(demo_cache, tracking_uri, "detector=exch", "control=order_answer_len",
                    "detector.shards=10", "detector.permutations=20")
    assert 0 < outcome.metrics["p_value"] <= 1 and outcome.metrics["n_shards"] == 10
    assert abs(outcome.metrics["control_order_spearman"]) < 0.2  # little of the release order is left


@pytest.mark.extended
def test_a_misfit_cell_is_recorded_failed(demo_cache, tracking_uri):
    result = run_medexp(f"paths.cache_dir={demo_cache}", f"tracking.uri={tracking_uri}", "detector=exch",
                        "control=negative_demo_ood")
    assert result.returncode != 0 and "FAILED" in result.stdout
    (run,) = MlflowClient(tracking_uri).search_runs([MlflowClient(tracking_uri).get_experiment_by_name("medexp").experiment_id])
    assert run.info.status == "FAILED"
    assert "control=negative_demo_ood does not apply to detector=exch" in run.data.tags["medexp.error"]
