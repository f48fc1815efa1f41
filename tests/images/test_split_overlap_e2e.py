"""``python -m medexp experiment=split_overlap`` offline on a local VQA copy whose test split reuses
train images: every reused image is an exact duplicate, with the right per-question rate."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import run_medexp
from tests.images.split_fixture import write_split_benchmark

pytestmark = pytest.mark.slow


def test_split_overlap_reports_each_reused_image_as_an_exact_duplicate(tmp_path, tracking_uri):
    from mlflow.tracking import MlflowClient

    root = tmp_path / "myvqa"
    expected = write_split_benchmark(root)
    result = run_medexp("experiment=split_overlap", "bench=local", f"bench.root={root}", "bench.overlap_splits=[train,valid]",
                        f"tracking.uri={tracking_uri}", f"paths.cache_dir={tmp_path / 'cache'}",
                        f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 cells: 2 computed, 0 reused (tracked earlier), 0 failed" in result.stdout

    client = MlflowClient(tracking_uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "medexp"]
    runs = {run.data.tags["medexp.detector"]: run for run in client.search_runs(
        [experiment.experiment_id], "tags.`medexp.bench` = 'local'")}
    assert set(runs) == {"image_nn-phash-local_train", "image_nn-phash-local_valid"}
    for split in ("train", "valid"):
        run, truth = runs[f"image_nn-phash-local_{split}"], expected[split]
        assert run.info.status == "FINISHED" and run.data.tags["medexp.model"] == "none"
        metrics = run.data.metrics
        assert (metrics["n_images"], metrics["n_questions"]) == (expected["n_images"], expected["n_questions"])
        assert metrics["corpus_n_images"] == truth["corpus_rows"] and metrics["tau_degenerate"] == 0
        assert metrics["n_exact_duplicates_images"] == metrics["n_images_flagged"] == truth["images"]
        assert metrics["n_exact_duplicates_questions"] == metrics["n_questions_flagged"] == truth["questions"]
        assert metrics["question_flag_rate"] == pytest.approx(truth["questions"] / expected["n_questions"])
        assert metrics["image_flag_rate"] == pytest.approx(truth["images"] / expected["n_images"])
        images = pd.read_parquet(client.download_artifacts(run.info.run_id, "nearest_neighbours.parquet", str(tmp_path)))
        matches = images["match"].value_counts()
        assert matches.get("same_bytes", 0) == truth["same_bytes"] and matches.get("same_vector", 0) == truth["same_vector"]
        questions = pd.read_parquet(client.download_artifacts(run.info.run_id, "questions.parquet", str(tmp_path)))
        assert len(questions) == expected["n_questions"] and questions["flagged"].sum() == truth["questions"]
        assert all(neighbour.startswith(f"local::{split}::") for neighbour in images["neighbour_id"])


def test_slake_split_overlap_compares_images_whatever_the_language_of_their_questions(tmp_path, tracking_uri):
    """On the official SLAKE layout, a test image that train and validate use only under Chinese
    questions is an exact duplicate, and train's empty-answer row stops nothing: an image corpus
    needs no answers."""
    from mlflow.tracking import MlflowClient

    from tests.benchmarks.upstream import slake_split_records, write_slake_release

    root = write_slake_release(tmp_path / "Slake1.0")
    result = run_medexp("experiment=split_overlap", "bench=slake", f"bench.root={root}", f"tracking.uri={tracking_uri}",
                        f"paths.cache_dir={tmp_path / 'cache'}", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 cells: 2 computed, 0 reused (tracked earlier), 0 failed" in result.stdout
    client = MlflowClient(tracking_uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "medexp"]
    runs = {run.data.tags["medexp.detector"]: run for run in client.search_runs(
        [experiment.experiment_id], "tags.`medexp.bench` = 'slake'")}
    records = slake_split_records()
    # test: 5 English questions about 3 images; train reuses xmlab7 (1 English test question) and
    # validate xmlab160 (2), each only under a Chinese question
    for split, questions in (("train", 1), ("validate", 2)):
        metrics = runs[f"image_nn-phash-slake_{split}"].data.metrics
        assert (metrics["n_images"], metrics["n_questions"]) == (3, 5)
        assert metrics["corpus_n_images"] == len(records[split])  # every row, Chinese ones included
        assert metrics["n_exact_duplicates_images"] == 1 and metrics["n_exact_duplicates_questions"] == questions
        assert metrics["corpus_n_distinct_files_outside_selection"] == 1
        assert metrics["n_corpus_skipped"] == 0
