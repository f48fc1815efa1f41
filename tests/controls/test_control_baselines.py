"""external_baseline: which baselines run, with which seed and cohort, and how their results merge."""

from __future__ import annotations

import pandas as pd
import pytest
from omegaconf import OmegaConf

from medexp.benchmarks.base import Benchmark
from medexp.config import compose, model_config
from medexp.controls.baselines import baseline_models, merge_baseline_results
from medexp.detectors.base import DetectorResult
from medexp.evaluators.baselines import run_with_baselines
from medexp.evaluators.cohort import cohort_scores
from medexp.evaluators.context import CellContext
from medexp.kernel.hashing import derive_seed, stable_hash
from medexp.models.keys import model_cache_key
from tests.controls.helpers import examples

IDS = ["demo::test::0", "demo::test::1", "demo::test::2"]


def _names(configs):
    return [str(config.name) for config in configs]


def _context(*overrides, seed=123):
    cfg = compose(["control=external_baseline_demo", *overrides])
    released = examples(IDS)
    return CellContext(cfg, seed, Benchmark("demo", released), released, cfg.paths.cache_dir)


def test_baselines_are_deduplicated_and_never_the_target():
    control = OmegaConf.create({"name": "ext", "baselines": ["demo_clean_c", "demo_leaky", "demo_clean_c", "demo_clean"]})
    assert _names(baseline_models(control, model_config("demo_leaky"))) == ["demo_clean_c", "demo_clean"]
    assert _names(baseline_models(control, model_config("demo_clean_c"))) == ["demo_leaky", "demo_clean"]
    only_self = OmegaConf.create({"name": "ext", "baselines": ["demo_clean_c"]})
    assert baseline_models(only_self, model_config("demo_clean_c")) == []
    with pytest.raises(ValueError, match="control=ext: control.baselines is empty"):
        baseline_models(OmegaConf.create({"name": "ext", "baselines": []}), model_config("demo_leaky"))


def test_each_baseline_runs_with_its_own_cells_seed_and_an_extended_cohort():
    ctx = _context("model=demo_leaky", "detector=exch_rank", "control.baselines=[demo_clean_c,demo_clean_b]")
    calls = []

    def fake_evaluator(run_ctx):
        calls.append((str(run_ctx.cfg.model.name), run_ctx.seed, _names(run_ctx.cohort_additions), run_ctx.examples))
        p_value = {"demo_leaky": 0.001, "demo_clean_c": 0.4, "demo_clean_b": 0.03}[str(run_ctx.cfg.model.name)]
        return DetectorResult({"p_value": p_value, "statistic": 1.0, "n_examples": 3.0, "flag": float(p_value < 0.01)})

    result = run_with_baselines(ctx, fake_evaluator)

    def cell_seed(model):  # the seed the cell of that model would get (Cell.seed), written out
        return derive_seed(0, f"model={model},bench=demo,detector=exch_rank,control=external_baseline_demo")

    assert [(name, seed, additions) for name, seed, additions, _ in calls] == [
        ("demo_leaky", 123, ["demo_clean_c", "demo_clean_b"]),
        ("demo_clean_c", cell_seed("demo_clean_c"), ["demo_clean_c", "demo_clean_b", "demo_leaky"]),
        ("demo_clean_b", cell_seed("demo_clean_b"), ["demo_clean_c", "demo_clean_b", "demo_leaky"]),
    ]
    assert all(call[3] is ctx.examples for call in calls)  # the same examples, in the same order
    assert ctx.cfg.model.name == "demo_leaky"  # the cell's own config is untouched
    assert result.metrics["p_value"] == 0.001
    assert result.metrics["baseline_demo_clean_c_p_value"] == 0.4
    assert result.metrics["baseline_demo_clean_b_flag"] == 0.0
    assert result.metrics["baselines_min_p_value"] == 0.03
    assert result.metrics["n_baselines"] == 2.0


def test_merged_result_keeps_the_cells_metrics_and_adds_each_baselines():
    own = DetectorResult({"p_value": 0.002, "statistic": 0.3, "n_examples": 10.0, "flag": 1.0, "pr_delta_gt_100": 0.2},
                         pd.DataFrame({"a": [1]}), "per_stratum", {"delta_tail": "own figure"},
                         {"alpha": pd.DataFrame({"b": [2]})})
    blip = DetectorResult({"p_value": 0.5, "statistic": 0.1, "n_examples": 10.0, "flag": 0.0, "pr_delta_gt_100": 0.01},
                          pd.DataFrame({"c": [3]}), "per_stratum", {"delta_tail": "blip figure"})
    instruct = DetectorResult({"p_value": 0.004, "statistic": 0.25, "n_examples": 10.0, "flag": 1.0,
                               "pr_delta_gt_100": 0.19}, warnings=["tau is degenerate"])
    merged = merge_baseline_results(own, {"blip2": blip, "instructblip": instruct})
    assert {k: v for k, v in merged.metrics.items() if not k.startswith(("baseline", "n_baselines"))} == own.metrics
    assert merged.metrics["baseline_blip2_pr_delta_gt_100"] == 0.01
    assert merged.metrics["baseline_instructblip_p_value"] == 0.004
    assert merged.metrics["baselines_min_p_value"] == 0.004
    assert merged.metrics["baselines_n_flagged"] == 1.0
    assert merged.metrics["n_baselines"] == 2.0
    table = merged.extra_tables["baselines"]
    assert list(table.columns[:4]) == ["model", "p_value", "statistic", "flag"]
    assert table["model"].tolist() == ["blip2", "instructblip"]
    assert table["pr_delta_gt_100"].tolist() == [0.01, 0.19]
    assert merged.table is own.table and merged.table_name == "per_stratum"
    assert merged.figures == {"delta_tail": "own figure", "baselines/blip2/delta_tail": "blip figure"}
    assert set(merged.extra_tables) == {"alpha", "baselines", "baselines/blip2/per_stratum"}
    assert merged.warnings == ["baseline instructblip: tau is degenerate"]


def test_no_baseline_left_adds_only_the_count():
    own = DetectorResult({"p_value": 0.2, "statistic": 0.0, "n_examples": 3.0, "flag": 0.0})
    merged = merge_baseline_results(own, {})
    assert merged.metrics == {**own.metrics, "n_baselines": 0.0}
    assert "baselines" not in merged.extra_tables


@pytest.fixture()
def fake_scores(monkeypatch):
    """example_scores replaced: records which model (by its score-cache key) was scored."""
    scored = []

    def example_scores(scorer, model_key, batch, cache_dir):
        scored.append(stable_hash(model_key))
        return pd.DataFrame({"example_id": [ex.example_id for ex in batch], "position": [ex.position for ex in batch]})

    monkeypatch.setattr("medexp.scoring.example_scores", example_scores)
    # a weights fingerprint would build each demo model: its name stands for its weights here
    monkeypatch.setattr("medexp.models.keys.weights_fingerprint", lambda model_cfg, cache_dir: model_cfg.name)
    return scored


def _key(name):
    return stable_hash(model_cache_key(model_config(name), "unused"))


def test_cohort_of_the_cell_and_of_a_baseline(fake_scores):
    ctx = _context("model=demo_leaky", "detector=mink_tail", "detector.cohort=[demo_clean,demo_leaky]")
    ctx.cohort_additions = [model_config("demo_clean_c")]
    cohort = cohort_scores(ctx)
    assert cohort.models == ["demo_leaky", "demo_clean", "demo_clean_c"]
    assert fake_scores == [_key("demo_leaky"), _key("demo_clean"), _key("demo_clean_c")]

    # With the baseline as target: everyone else of the extended cohort, the cell's model once.
    fake_scores.clear()
    baseline_ctx = _context("model=demo_clean_c", "detector=mink_tail", "detector.cohort=[demo_clean,demo_leaky]")
    baseline_ctx.cohort_additions = [model_config("demo_clean_c"), ctx.cfg.model]
    assert cohort_scores(baseline_ctx).models == ["demo_clean_c", "demo_clean", "demo_leaky"]
    assert fake_scores == [_key("demo_clean_c"), _key("demo_clean"), _key("demo_leaky")]


def test_a_baseline_already_in_the_cohort_is_not_added_twice(fake_scores):
    ctx = _context("model=demo_leaky", "detector=mink_tail")  # the demo cohort lists demo_clean_c already
    ctx.cohort_additions = [model_config("demo_clean_c")]
    assert cohort_scores(ctx).models == ["demo_leaky", "demo_clean", "demo_clean_b", "demo_clean_c", "demo_leaky_b"]
    assert len(fake_scores) == 5
    ctx = _context("model=demo_leaky", "detector=mink_tail", "detector.cohort=[demo_clean,demo_clean]")
    with pytest.raises(ValueError, match="detector.cohort names the model 'demo_clean' twice"):
        cohort_scores(ctx)


def test_a_cohort_entry_may_carry_model_overrides(fake_scores):
    """Replicates that differ only in demo.seed, listed as '<name> key=value' entries, each scored
    under its own cache key; the cell's own replicate is never its own reference."""
    from medexp.config import listed_model_config

    entries = ["demo_clean_replicate demo.seed=3", "demo_clean_replicate demo.seed=4",
               "demo_clean_replicate demo.seed=5"]
    ctx = _context("model=demo_clean_replicate", "model.demo.seed=5", "detector=mink_tail",
                   f"detector.cohort=[{','.join(repr(entry) for entry in entries)}]")
    assert cohort_scores(ctx).models == ["demo_clean_s5", "demo_clean_s3", "demo_clean_s4"]
    assert fake_scores[1:] == [stable_hash(model_cache_key(listed_model_config(entry), "unused"))
                               for entry in entries[:2]]
    assert len(set(fake_scores)) == 3
    ctx = _context("model=demo_leaky", "detector=mink_tail", "detector.cohort=['demo_clean_replicate demo.sed=3']")
    with pytest.raises(ValueError, match="'demo_clean_replicate demo.sed=3'.*Key 'sed' not in"):
        cohort_scores(ctx)
