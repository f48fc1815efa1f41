"""Caches and tracked cells are keyed by content: an edited benchmark file or a replaced image
means recomputation (without force); a moved copy or a touched file does not."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from medexp.benchmarks.content import content_hash
from medexp.benchmarks.local import load_local
from medexp.config import compose
from medexp.demo.scans import ScanSpec, png_bytes, render_scan
from medexp.detectors import DetectorResult
from medexp.runner import cell_run
from medexp.scoring import example_scores
from medexp.tracking.tags import version_tags

ROWS = [
    {"id": "q1", "question": "Which organ?", "answer": "lung", "image": "images/a.png"},
    {"id": "q2", "question": "Is there a lesion?", "answer": "yes", "image": "images/b.png"},
    {"id": "q3", "question": "Which side?", "answer": "left", "image": "images/a.png"},
]


def write_bench(root: Path, rows=ROWS) -> Path:
    (root / "images").mkdir(parents=True, exist_ok=True)
    for seed, name in enumerate(("a.png", "b.png")):
        if not (root / "images" / name).exists():
            (root / "images" / name).write_bytes(png_bytes(render_scan(ScanSpec("CT", "lung", seed=seed), size=32)))
    (root / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return root


def black(path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (32, 32)).save(path)


def bench_hash(root: Path, cache: Path) -> str:
    return content_hash(load_local("mine", root, "test").examples, cache)


def test_content_hash_follows_content_not_paths(tmp_path):
    cache = tmp_path / "cache"
    root = write_bench(tmp_path / "bench")
    original = bench_hash(root, cache)
    assert bench_hash(shutil.copytree(root, tmp_path / "moved"), cache) == original  # same files elsewhere
    os.utime(root / "images" / "a.png", ns=(1, 1))  # a touched file keeps its content
    assert bench_hash(root, cache) == original

    black(root / "images" / "b.png")  # a replaced image
    replaced = bench_hash(root, cache)
    assert replaced != original
    write_bench(root, [ROWS[1], ROWS[0], ROWS[2]])  # a new order
    assert bench_hash(root, cache) not in (original, replaced)
    write_bench(root, [ROWS[0], {**ROWS[1], "answer": "no"}, ROWS[2]])  # a new answer
    assert bench_hash(root, cache) not in (original, replaced)


class CountingScorer:
    """Scores an example by the mean brightness of its image, and counts the examples it scored."""

    def __init__(self):
        self.scored = 0

    def score_examples(self, examples):
        from PIL import Image

        self.scored += len(examples)
        rows = []
        for example in examples:
            with Image.open(example.image) as image:
                value = float(np.asarray(image.convert("L"), dtype=np.float64).mean())
            rows.append({"example_id": example.example_id, "position": example.position, "sum_logprob": -value})
        return pd.DataFrame(rows)


def test_replaced_images_are_rescored(tmp_path):
    cache = tmp_path / "cache"
    root = write_bench(tmp_path / "bench")
    scorer = CountingScorer()
    first = example_scores(lambda: scorer, {"model": "m"}, load_local("mine", root, "test").examples, cache)
    again = example_scores(lambda: scorer, {"model": "m"}, load_local("mine", root, "test").examples, cache)
    assert scorer.scored == 3
    pd.testing.assert_frame_equal(first, again)
    for name in ("a.png", "b.png"):
        black(root / "images" / name)
    rescored = example_scores(lambda: scorer, {"model": "m"}, load_local("mine", root, "test").examples, cache)
    assert scorer.scored == 6
    assert (rescored["sum_logprob"] == 0.0).all() and (first["sum_logprob"] < 0).all()


def _result():
    table = pd.DataFrame({"example_id": ["a"], "score": [1.0]})
    return DetectorResult({"p_value": 0.5, "statistic": 0.0, "n_examples": 1.0, "flag": 0.0}, table, "per_example")


@pytest.fixture()
def local_cell(tmp_path, monkeypatch):
    """Run the cell model=none bench=local on a real local benchmark; the detector is faked."""
    root = write_bench(tmp_path / "bench")
    calls = []

    def evaluate(cfg, seed, inputs):
        calls.append(inputs.bench_hash)
        return dict(_result().metrics), _result()

    monkeypatch.setattr(cell_run, "evaluate", evaluate)
    overrides = ["model=none", "bench=local", f"bench.root={root}", "detector=exch_rank",
                 f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", f"paths.cache_dir={tmp_path / 'cache'}"]

    def run(*extra):
        return cell_run.run_cell(compose([*overrides, *extra]))

    run.root, run.calls = root, calls
    return run


def test_a_tracked_cell_is_reused_only_on_the_same_content(local_cell):
    first = local_cell()
    assert first.status == "FINISHED"
    assert local_cell().status == "CACHED"
    os.utime(local_cell.root / "images" / "a.png", ns=(5, 5))
    assert local_cell().status == "CACHED"  # touched, not changed

    write_bench(local_cell.root, [ROWS[0], {**ROWS[1], "answer": "no"}, ROWS[2]])  # an edited test.jsonl
    edited = local_cell()
    assert edited.status == "FINISHED" and edited.run_id != first.run_id
    assert local_cell().status == "CACHED"

    black(local_cell.root / "images" / "a.png")  # a replaced image
    assert local_cell().status == "FINISHED"
    assert len(local_cell.calls) == 3 and len(set(local_cell.calls)) == 3


def test_the_content_hash_and_the_package_versions_are_tags_of_the_run(local_cell):
    from mlflow.tracking import MlflowClient

    outcome = local_cell()
    cfg = compose([f"tracking.uri=sqlite:///{local_cell.root.parent / 'mlflow.db'}"])
    tags = MlflowClient(cfg.tracking.uri).get_run(outcome.run_id).data.tags
    expected = content_hash(load_local("local", local_cell.root, "test").examples, local_cell.root.parent / "cache")
    assert tags["medexp.bench_hash"] == expected
    assert len(tags["medexp.inputs_hash"]) == 32
    assert tags["medexp.host"] and int(tags["medexp.pid"]) == os.getpid()
    for package in ("torch", "transformers", "numpy", "scipy", "medexp"):
        assert tags[f"medexp.versions.{package}"] == importlib.metadata.version(package)


def test_a_package_that_is_not_installed_is_recorded_so(monkeypatch):
    def version(package):
        if package == "torch":
            raise importlib.metadata.PackageNotFoundError(package)
        return "1.0"

    monkeypatch.setattr(importlib.metadata, "version", version)
    tags = version_tags()
    assert tags["medexp.versions.torch"] == "not installed" and tags["medexp.versions.numpy"] == "1.0"
