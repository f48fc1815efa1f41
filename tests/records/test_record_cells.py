"""Cells over models on record: what runs, what is refused before any work, and a benchmark
loaded from its annotations alone when the cell reads no pixels."""

from __future__ import annotations

import json

import pytest

from medexp.benchmarks import ANNOTATION_LOADERS, LOADERS, load_benchmark_from_config
from medexp.config import compose
from medexp.evaluators import cell_reads_pixels, check_records
from medexp.kernel.registry import import_object


def _cell(tmp_path, slake_root, audit_file, *overrides, model=None):
    """A cell on the small release; the model is the audit file's Model-A on record unless ``model`` is named."""
    record = ["model=scores", "model.name=model_a", f"model.scores.path={audit_file}", "model.scores.model=Model-A"]
    return compose([f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", f"paths.cache_dir={tmp_path / 'cache'}",
                    "bench=slake", f"bench.root={slake_root}", *([f"model={model}"] if model else record), *overrides])


def test_every_annotation_loader_is_a_format_and_imports():
    assert set(ANNOTATION_LOADERS) <= set(LOADERS)
    for spec in ANNOTATION_LOADERS.values():
        assert callable(import_object(spec)), spec


@pytest.mark.parametrize("detector, needs", [
    ("exch", "the model itself, to score shards of the benchmark as text in shuffled orders"),
    ("mink_tail", "per-token Min-K%\\+\\+ z values over the full vocabulary"),
    ("topk_jaccard", "per-token Min-K%\\+\\+ z values"),
    ("option_order", "the model itself"),
])
def test_a_detector_needing_more_than_scores_refuses_a_record_before_any_work(tmp_path, slake_root, audit_file,
                                                                               detector, needs):
    cfg = _cell(tmp_path, slake_root, audit_file, f"detector={detector}")
    with pytest.raises(ValueError, match=f"model=model_a is a record of per-example scores .*detector={detector} "
                                         f"needs {needs}"):
        check_records(cfg)


def test_a_record_of_means_refuses_a_sum_and_an_order_by_token_counts(tmp_path, slake_root, audit_file):
    with pytest.raises(ValueError, match="holding mean_logprob only .*set detector.score=mean_logprob"):
        check_records(_cell(tmp_path, slake_root, audit_file, "detector=exch_rank"))  # score: sum_logprob
    for control, why in (("order_answer_len", "orders examples by the model's answer token counts"),
                         ("blind_image", "scores the examples without their images")):
        with pytest.raises(ValueError, match=f"control={control} {why}, .*which a record cannot give"):
            check_records(_cell(tmp_path, slake_root, audit_file, "detector=exch_rank", "detector.score=mean_logprob",
                                f"control={control}"))
    check_records(_cell(tmp_path, slake_root, audit_file, "detector=exch_rank", "detector.score=mean_logprob",
                        "control=order_hash"))


def test_a_record_in_a_cohort_is_checked_like_the_cells_model(tmp_path, slake_root, audit_file):
    cfg = _cell(tmp_path, slake_root, audit_file, "detector=mink_tail", "detector.cohort=[blip2_record]",
                model="qwen2_5_vl")
    with pytest.raises(ValueError, match="model=blip2_record is a record .*detector=mink_tail needs"):
        check_records(cfg)


def test_only_a_cell_of_records_reading_scores_reads_no_pixels(tmp_path, slake_root, audit_file):
    records = ["detector=overlap_gap"]
    assert not cell_reads_pixels(_cell(tmp_path, slake_root, audit_file, *records))
    assert not cell_reads_pixels(_cell(tmp_path, slake_root, audit_file, *records, "detector.baseline=blip2_record"))
    # a model that runs reads the images, as does a record's cell with a model that runs beside it
    assert cell_reads_pixels(_cell(tmp_path, slake_root, audit_file, *records, model="qwen2_5_vl"))
    assert cell_reads_pixels(_cell(tmp_path, slake_root, audit_file, *records, "detector.baseline=blip2"))
    assert cell_reads_pixels(_cell(tmp_path, slake_root, audit_file, "detector=image_nn", model="none"))


def test_slake_without_images_loads_for_a_cell_without_pixels_and_is_refused_otherwise(tmp_path, slake_root):
    bench_cfg = compose(["bench=slake", f"bench.root={slake_root}"]).bench
    bench = load_benchmark_from_config(bench_cfg, tmp_path, ("question", "answer"), pixels=False)
    assert bench.annotations_only and bench.layout == "slake_annotations"
    assert len(bench.examples) == 12 and all(example.image is None for example in bench.examples)
    assert bench.examples[4].meta["img_name"] == "xmlab1/source.jpg"  # questions still know their image
    with pytest.raises(FileNotFoundError, match="no image folder .*This cell reads images; only a cell whose models "
                                                "are records of per-example scores"):
        load_benchmark_from_config(bench_cfg, tmp_path, ("question", "answer"))


def test_a_cell_of_records_runs_offline_says_it_read_no_pixels_and_keys_the_files_digest(tmp_path, slake_root,
                                                                                          audit_file):
    from medexp.runner.cell_run import run_cell
    from medexp.runner.inputs import load_inputs

    cfg = _cell(tmp_path, slake_root, audit_file, "detector=overlap_gap", "detector.n_permutations=200",
                "detector.n_resamples=100")
    outcome = run_cell(cfg)
    assert outcome.status == "FINISHED", outcome.error
    assert outcome.metrics["bench_annotations_only"] == 1.0
    assert outcome.metrics["scores_n_matched"] == 12.0 and outcome.metrics["n_flagged_images"] == 1.0
    before = load_inputs(cfg, tmp_path / "cache").inputs_hash
    document = json.loads(audit_file.read_text())
    document["records"][0]["mean_logprob"]["Model-A"] -= 1.0
    audit_file.write_text(json.dumps(document))
    assert load_inputs(cfg, tmp_path / "cache").inputs_hash != before  # new scores, new inputs: never reused


def test_a_refused_cell_fails_with_the_reason_and_no_work(tmp_path, slake_root, audit_file):
    from medexp.runner.cell_run import run_cell

    outcome = run_cell(_cell(tmp_path, slake_root, audit_file, "detector=exch"))
    assert outcome.status == "FAILED" and "needs the model itself" in outcome.error
    assert not (tmp_path / "cache" / "scores").exists()  # nothing was scored


class _FakeScorer:
    """Scores an example by its qid, and counts what it scored (a model that runs)."""

    def __init__(self):
        self.scored = 0

    def score_examples(self, examples):
        import pandas as pd

        self.scored += len(examples)
        return pd.DataFrame([{"example_id": ex.example_id, "position": ex.position, "n_answer_tokens": 2,
                              "sum_logprob": -float(ex.example_id.rsplit("::", 1)[1]) / 100,
                              "mean_logprob": -float(ex.example_id.rsplit("::", 1)[1]) / 200} for ex in examples])


def test_a_cell_reads_a_running_model_through_the_cache_and_a_record_from_its_file(tmp_path, slake_root, audit_file):
    from medexp.evaluators.context import CellContext

    cfg = _cell(tmp_path, slake_root, audit_file, "detector=overlap_gap", model="qwen2_5_vl")
    bench = load_benchmark_from_config(cfg.bench, tmp_path / "cache", ("question", "answer"), pixels=False)
    ctx = CellContext(cfg, 0, bench, list(bench.examples), tmp_path / "cache")
    scorer = _FakeScorer()
    ctx.__dict__["_scorer"], ctx.__dict__["model_key"] = scorer, {"model": "fake"}  # no weights are loaded
    first = ctx.example_scores()
    assert scorer.scored == 12 and list(first["sum_logprob"])[:2] == [-1.0, -1.01]
    assert ctx.example_scores().equals(first) and scorer.scored == 12  # the second time from the score cache
    record = compose(["model=scores", "model.name=model_b", f"model.scores.path={audit_file}",
                      "model.scores.model=Model-B"]).model
    table = ctx.example_scores(model_cfg=record)
    assert scorer.scored == 12 and len(table) == 12
    assert ctx.scoring_metrics() == {"scores_n_rows.model_b": 12.0, "scores_n_matched.model_b": 12.0,
                                     "scores_n_missing.model_b": 0.0}
