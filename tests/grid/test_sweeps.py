"""Sweeps end to end: the parent run, nested cells, the summary, resume and the launchers."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_medexp
from tests.grid.conftest import cell_runs, store, sweep_runs, write_experiment

pytestmark = pytest.mark.slow


@pytest.mark.extended
def test_joblib_grid_runs_each_cell_nested_under_one_parent_run(common, tracking_uri, tmp_path):
    searchpath = write_experiment(
        tmp_path / "conf",
        "grid2x2",
        "# @package _global_\n"
        "hydra:\n"
        "  mode: MULTIRUN\n"
        "  sweeper:\n"
        "    grid:\n"
        "      - {model: [demo_clean, demo_leaky], control: [none, order_hash]}\n",
    )
    sweep_dir = tmp_path / "sweep"
    result = run_medexp(
        "experiment=grid2x2", searchpath, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={sweep_dir}", *common,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 cells: 4 computed, 0 reused (tracked earlier), 0 failed" in result.stdout

    (parent,) = sweep_runs(tracking_uri)
    assert parent.status == "FINISHED"
    assert parent.tags["medexp.sweep_dir"] == str(sweep_dir)
    assert parent.tags["mlflow.runName"].startswith("sweep ")
    assert "experiment=grid2x2" in parent.params["overrides"]
    assert parent.metrics == {"n_cells": 4.0, "n_computed": 4.0, "n_reused": 0.0, "n_failed": 0.0, "n_killed": 0.0,
                              "n_lost": 0.0, "n_unknown": 0.0, "n_requeued": 0.0, "n_reconciled": 0.0,
                              "n_shared": 0.0}
    artefacts = {item.path for item in store(tracking_uri).client.list_artifacts(parent.run_id)}
    assert {"sweep.yaml", "sweep_summary.md", "sweep_summary.json"} <= artefacts

    cells = cell_runs(tracking_uri)
    assert sorted((run.tags["medexp.model"], run.tags["medexp.control"]) for run in cells) == sorted(
        itertools.product(["demo_clean", "demo_leaky"], ["none", "order_hash"])
    )
    for run in cells:
        assert run.status == "FINISHED"
        assert run.tags["mlflow.parentRunId"] == parent.run_id
    # Each job wrote its outcome into its own directory, naming the run it logged.
    outcomes = [json.loads(path.read_text()) for path in sweep_dir.rglob("medexp_cell.json")]
    assert sorted(o["run_id"] for o in outcomes) == sorted(run.run_id for run in cells)
    assert {o["sweep_run_id"] for o in outcomes} == {parent.run_id}


@pytest.mark.extended
def test_a_single_cell_run_opens_no_sweep_run(common, tracking_uri):
    result = run_medexp("model=demo_clean", *common)
    assert result.returncode == 0, result.stderr
    (run,) = cell_runs(tracking_uri)
    assert "mlflow.parentRunId" not in run.tags
    assert sweep_runs(tracking_uri) == []


def write_local_benchmark(root: Path, demo_cache: Path, n: int = 60) -> None:
    """A copy of the first ``n`` demo test examples in the generic local format."""
    from medexp.config import compose
    from medexp.demo.cache import demo_benchmark_root

    demo_root = demo_benchmark_root(compose(["bench=demo"]).bench.demo, demo_cache)
    lines = (demo_root / "test.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    os.symlink(demo_root / "images", root / "images")
    (root / "test.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.extended
def test_failed_cell_is_reported_and_only_it_is_recomputed_on_a_rerun(common, demo_cache, tracking_uri, tmp_path):
    local_root = tmp_path / "localbench"
    local_root.mkdir()  # its test.jsonl is missing on the first run: that cell fails for a real reason
    searchpath = write_experiment(
        tmp_path / "conf",
        "resume",
        "# @package _global_\n"
        "hydra:\n"
        "  mode: MULTIRUN\n"
        "  sweeper:\n"
        "    grid:\n"
        "      - {model: [demo_clean, demo_leaky], bench: demo}\n"
        # the images are a symlink to the demo's folder, outside the bench root
        f"      - {{model: demo_leaky, bench: local, bench.root: '{local_root}', bench.allow_outside_root: true}}\n",
    )
    sweep = ("experiment=resume", searchpath, f"hydra.sweep.dir={tmp_path / 'sweep'}", *common)
    failing_key = "model=demo_leaky,bench=local,detector=exch_rank,control=none"

    first = run_medexp(*sweep)
    assert first.returncode == 1, first.stdout + first.stderr  # a failed cell fails the command, after the summary
    assert "3 cells: 2 computed, 0 reused (tracked earlier), 1 failed" in first.stdout
    failed_line = next(line for line in first.stdout.splitlines() if line.startswith("  FAILED "))
    assert failing_key in failed_line and "FileNotFoundError" in failed_line and "test.jsonl" in failed_line
    (parent1,) = sweep_runs(tracking_uri)
    assert parent1.status == "FAILED"
    assert parent1.metrics["n_failed"] == 1.0 and parent1.metrics["n_computed"] == 2.0
    first_runs = {run.tags["medexp.cell_key"]: run for run in cell_runs(tracking_uri)}
    assert len(first_runs) == 3  # the sweep went on past the failure
    assert first_runs[failing_key].status == "FAILED"
    assert "test.jsonl" in first_runs[failing_key].tags["medexp.error"]
    assert {run.tags["mlflow.parentRunId"] for run in first_runs.values()} == {parent1.run_id}

    write_local_benchmark(local_root, demo_cache)
    second = run_medexp(*sweep)  # same sweep dir: the first sweep's outcome files must not be counted
    assert second.returncode == 0, second.stdout + second.stderr
    assert "3 cells: 1 computed, 2 reused (tracked earlier), 0 failed" in second.stdout
    parent2 = next(run for run in sweep_runs(tracking_uri) if run.run_id != parent1.run_id)
    assert parent2.status == "FINISHED"
    by_key = {}
    for run in cell_runs(tracking_uri):
        by_key.setdefault(run.tags["medexp.cell_key"], []).append(run)
    for key, runs in by_key.items():
        if key == failing_key:  # recomputed under the new parent
            assert sorted((r.status, r.tags["mlflow.parentRunId"]) for r in runs) == sorted(
                [("FAILED", parent1.run_id), ("FINISHED", parent2.run_id)]
            )
        else:  # reused: the same single run, still under the first parent
            assert [r.run_id for r in runs] == [first_runs[key].run_id]

    forced = run_medexp(*sweep[:2], f"hydra.sweep.dir={tmp_path / 'forced'}", *common, "force=true")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "3 cells: 3 computed, 0 reused (tracked earlier), 0 failed" in forced.stdout
    parent3 = next(run for run in sweep_runs(tracking_uri) if run.run_id not in {parent1.run_id, parent2.run_id})
    recomputed = [run for run in cell_runs(tracking_uri) if run.tags["mlflow.parentRunId"] == parent3.run_id]
    assert sorted(run.tags["medexp.cell_key"] for run in recomputed) == sorted(by_key)
    assert all(run.status == "FINISHED" for run in recomputed)


def check_two_cells_under_their_parent(result, tracking_uri: str, launcher: str):
    """A two-cell sweep (demo_clean, demo_leaky) that ran through ``launcher``: both cells FINISHED
    under a FINISHED parent. Returns the parent and the cells."""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 cells: 2 computed, 0 reused (tracked earlier), 0 failed" in result.stdout
    (parent,) = sweep_runs(tracking_uri)
    assert parent.status == "FINISHED"
    assert parent.params["launcher"] == launcher
    cells = cell_runs(tracking_uri)
    assert sorted(run.tags["medexp.model"] for run in cells) == ["demo_clean", "demo_leaky"]
    assert all(run.status == "FINISHED" and run.tags["mlflow.parentRunId"] == parent.run_id for run in cells)
    return parent, cells


@pytest.mark.extended
def test_submitit_local_runs_two_cells_under_the_parent_run(common, tracking_uri, tmp_path):
    result = run_medexp(
        "-m",
        "model=demo_clean,demo_leaky",
        "hydra/launcher=submitit_local",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *common,
    )
    check_two_cells_under_their_parent(result, tracking_uri,
                                       "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher")
    # Each cell ran in its own submitit process, which logged into the sweep's .submitit folder.
    assert len(list((tmp_path / "sweep" / ".submitit").glob("*/*_result.pkl"))) == 2


@pytest.mark.extended
def test_ray_runs_two_cells_as_tasks_on_a_local_ray_with_the_submitting_environment(common, tracking_uri, tmp_path):
    result = run_medexp(
        "-m", "model=demo_clean,demo_leaky", "hydra/launcher=ray", f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *[override for override in common if not override.startswith("paths.cache_dir=")],
        extra_env={"MEDEXP_CACHE": common_cache(common), "RAY_USAGE_STATS_ENABLED": "0"},
    )  # fmt: skip
    parent, cells = check_two_cells_under_their_parent(
        result, tracking_uri, "hydra_plugins.medexp_ray_launcher.medexp_ray_launcher.RayLauncher")
    for run in cells:
        assert len(run.tags["medexp.ray_node_id"]) == 56  # a Ray node id: 28 bytes in hex
        assert run.tags["medexp.pid"] != parent.tags["medexp.pid"]  # a Ray worker, not the driver
    assert "medexp.ray_node_id" not in parent.tags  # the driver's run started before Ray did
    # MEDEXP_CACHE reached the workers: the cells scored into the session's demo cache.
    assert len(list((Path(common_cache(common)) / "scores").iterdir())) >= 2


def common_cache(common: tuple[str, ...]) -> str:
    return next(override for override in common if override.startswith("paths.cache_dir=")).split("=", 1)[1]


def test_a_sweep_stopped_by_its_launcher_ends_its_parent_killed_and_lists_the_lost_jobs(common, tracking_uri, tmp_path):
    # joblib gives each cell half a second: no worker even finishes importing, the launcher raises.
    result = run_medexp(
        "-m", "model=demo_clean,demo_leaky", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
        "hydra.launcher.timeout=0.5", f"hydra.sweep.dir={tmp_path / 'sweep'}", *common,
    )  # fmt: skip
    assert result.returncode == 1
    assert "TimeoutError" in result.stderr
    assert "KILLED (aborted): 2 cells: 0 computed, 0 reused (tracked earlier), 0 failed, 2 lost" in result.stdout
    assert sum(line.startswith("  LOST job ") for line in result.stdout.splitlines()) == 2
    (parent,) = sweep_runs(tracking_uri)
    assert parent.status == "KILLED"
    assert parent.metrics["n_lost"] == 2.0


@pytest.mark.extended
def test_a_cell_shared_by_two_jobs_fills_the_cache_one_process_fills_and_its_plain_run_tracks_it(
    demo_cache, tracking_uri, tmp_path
):
    # exch with 6 benchmark shards: its score table is cached as 6 shards, which the two jobs split.
    cell = ("model=demo_leaky", "detector=exch", "detector.shards=6", "detector.permutations=5", "bench.max_examples=120")
    caches = {}
    for name in ("shared", "alone"):  # score caches of their own, the demo models shared
        caches[name] = tmp_path / name
        caches[name].mkdir()
        (caches[name] / "demo").symlink_to(demo_cache / "demo")

    shared = run_medexp(
        "-m", *cell, "split.tasks=2", "split.task=0,1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={tmp_path / 'sweep'}", f"paths.cache_dir={caches['shared']}", f"tracking.uri={tracking_uri}",
    )  # fmt: skip
    assert shared.returncode == 0, shared.stdout[-3000:] + shared.stderr[-3000:]
    assert "2 cells: 0 computed, 0 reused (tracked earlier), 0 failed, 2 shared-work tasks (nothing tracked)" in shared.stdout
    assert cell_runs(tracking_uri) == []
    # The two jobs computed every shard between them (the later one may have read some the other wrote).
    outcomes = [json.loads(path.read_text()) for path in (tmp_path / "sweep").glob("*/medexp_cell.json")]
    assert sorted(outcome["status"] for outcome in outcomes) == ["SHARED", "SHARED"]

    tracked = run_medexp(*cell, f"paths.cache_dir={caches['shared']}", f"tracking.uri={tracking_uri}")
    assert tracked.returncode == 0, tracked.stderr[-3000:]
    assert "scoring shard orders" not in tracked.stderr  # read from the shared entry, nothing scored
    alone = run_medexp(*cell, f"paths.cache_dir={caches['alone']}", f"tracking.uri=sqlite:///{tmp_path / 'alone.db'}")
    assert alone.returncode == 0, alone.stderr[-3000:]

    def markers(cache: Path) -> dict[str, str]:
        return {path.parent.name: path.read_text() for path in (cache / "scores").glob("*/complete.json")}

    assert markers(caches["shared"]) == markers(caches["alone"])  # every shard's SHA-256, byte for byte
    (run,) = cell_runs(tracking_uri)
    assert run.status == "FINISHED"
    assert run.metrics == store(f"sqlite:///{tmp_path / 'alone.db'}").search({})[0].metrics
