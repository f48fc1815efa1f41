"""``python -m medexp.plan``: what a cell would compute first and how split jobs share it, with
nothing computed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, run_medexp

CELL = ("model=demo_leaky", "detector=exch", "detector.shards=6", "detector.permutations=5", "bench.max_examples=120")


def plan(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "medexp.plan", *overrides], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.extended
def test_plan_names_the_first_entry_and_the_tasks_starts_then_nothing_once_the_cell_ran(demo_cache, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "demo").symlink_to(demo_cache / "demo")
    planned = plan(*CELL, "split.tasks=3", f"paths.cache_dir={cache}")
    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    assert lines[0] == "cell model=demo_leaky,bench=demo,detector=exch,control=none"
    assert lines[1] == "first work: scoring shard orders, 6 items in 6 shards of 1 (0 written already, 6 to compute)"
    assert "split.tasks=3: tasks start at shards 0, 2, 4; running at once, each computes about 2 shards" in planned.stdout
    assert "split.tasks=3 split.task=0,1,2" in planned.stdout
    assert "MiB of weights on disk (1 safetensors files, loaded once in model.dtype=float32)" in lines[-1]
    assert not list((cache / "scores").glob("*/shard-*.parquet"))  # planning computed nothing

    ran = run_medexp(*CELL, f"paths.cache_dir={cache}", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}")
    assert ran.returncode == 0, ran.stderr[-2000:]
    again = plan(*CELL, f"paths.cache_dir={cache}")
    assert again.stdout.splitlines()[1].startswith("nothing to compute")


def test_plan_without_a_model_is_a_usage_error():
    result = plan("detector=exch")
    assert result.returncode == 2
    assert "name the model with model=<name>" in result.stderr
