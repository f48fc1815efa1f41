"""The sweep summary from outcome files, and the parent run's life cycle, without launching cells."""

from __future__ import annotations

import atexit
import json
from pathlib import Path

from hydra_plugins.medexp_grid_sweeper.medexp_grid_sweeper import JOBS_FILE
from medexp.runner.cell_run import CellOutcome
from medexp.runner.sweep import SweepParentRun, collect, find_parent_run, write_outcome
from tests.grid.conftest import store

KEY_A = "model=a,bench=demo,detector=exch_rank,control=none"
KEY_B = "model=b,bench=demo,detector=exch_rank,control=none"
KEY_C = "model=c,bench=demo,detector=exch_rank,control=none"


def launched(sweep_dir: Path, *jobs: list[str]) -> None:
    """The job list the medexp_grid sweeper records before launching."""
    records = [{"num": num, "overrides": overrides} for num, overrides in enumerate(jobs)]
    (sweep_dir / JOBS_FILE).write_text(json.dumps(records))


def test_summary_counts_outcomes_and_names_failed_cells_and_lost_jobs(tmp_path):
    launched(tmp_path, ["model=a"], ["model=b"], ["model=c"], ["model=d"])
    write_outcome(tmp_path / "0", CellOutcome(KEY_A, "r0", "FINISHED", {"p_value": 0.25}), 0, ["model=a"], "p")
    write_outcome(tmp_path / "1", CellOutcome(KEY_B, "r1", "FAILED", {}, "ValueError: bad"), 1, ["model=b"], "p")
    write_outcome(tmp_path / "x" / "2", CellOutcome(KEY_C, "r2", "CACHED", {"p_value": 0.5}), 2, ["model=c"], "p")

    summary = collect(tmp_path)
    assert summary.metrics() == {"n_cells": 4.0, "n_computed": 1.0, "n_reused": 1.0, "n_failed": 1.0, "n_killed": 0.0, "n_lost": 1.0,
                                 "n_unknown": 0.0, "n_requeued": 0.0, "n_reconciled": 0.0, "n_shared": 0.0}
    assert not summary.ok
    assert summary.text().splitlines() == [
        "4 cells: 1 computed, 1 reused (tracked earlier), 1 failed, 1 lost",
        f"  FAILED {KEY_B}: ValueError: bad (job 1, run r1)",
        "  LOST job 3 (model=d): it wrote no outcome",
    ]
    table = summary.markdown().splitlines()
    assert f"| 0 | `{KEY_A}` | FINISHED | 0.25 | r0 |  |" in table
    assert "| 3 | `model=d` | LOST | | | wrote no outcome |" in table
    assert json.loads(summary.to_json())["lost"] == [{"num": 3, "overrides": ["model=d"]}]


def test_summary_without_failures_is_ok_and_without_a_job_list_counts_what_reported(tmp_path):
    write_outcome(tmp_path / "0", CellOutcome(KEY_A, "r0", "FINISHED", {"p_value": 0.1}), 0, [], None)
    summary = collect(tmp_path)
    assert summary.ok
    assert summary.text() == "1 cells: 1 computed, 0 reused (tracked earlier), 0 failed"


def sweep_config(tmp_path: Path, tracking_uri: str):
    from hydra import compose, initialize_config_dir

    from medexp.config import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        overrides = [f"hydra.sweep.dir={tmp_path / 'sweep'}", f"tracking.uri={tracking_uri}"]
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def test_parent_run_is_found_by_its_sweep_dir_and_an_aborted_sweep_ends_killed(tmp_path, tracking_uri):
    config = sweep_config(tmp_path, tracking_uri)
    sweep_dir = tmp_path / "sweep"
    tracker = store(tracking_uri)

    interrupted = SweepParentRun()
    interrupted.on_multirun_start(config)
    atexit.unregister(interrupted._end_aborted)  # as if its process were killed before any exit handler
    first_id = find_parent_run(tracker, str(sweep_dir))
    assert tracker.get_run(first_id).tags["medexp.kind"] == "sweep"

    # A new sweep in the same directory ends the one left RUNNING and becomes the cells' parent.
    callback = SweepParentRun()
    callback.on_multirun_start(config)
    assert tracker.get_run(first_id).status == "KILLED"
    parent_id = find_parent_run(tracker, str(sweep_dir))
    assert parent_id != first_id
    assert find_parent_run(tracker, str(tmp_path / "elsewhere")) is None

    sweep_dir.mkdir()  # the sweeper makes it before launching
    launched(sweep_dir, ["model=a"], ["model=b"])
    write_outcome(sweep_dir / "0", CellOutcome(KEY_A, "r0", "FINISHED", {"p_value": 0.3}), 0, ["model=a"], parent_id)
    callback._end_aborted()  # what runs at exit when the launcher raised and Hydra skipped on_multirun_end
    parent = tracker.get_run(parent_id)
    assert parent.status == "KILLED"
    # n_reconciled: the first sweep's parent run, left RUNNING, ended KILLED when this one started
    assert parent.metrics == {"n_cells": 2.0, "n_computed": 1.0, "n_reused": 0.0, "n_failed": 0.0, "n_killed": 0.0,
                              "n_lost": 1.0, "n_unknown": 0.0, "n_requeued": 0.0, "n_reconciled": 1.0,
                              "n_shared": 0.0}
    assert "stopped before" in parent.tags["medexp.error"]
    callback._end_aborted()  # a second call (the real atexit one) changes nothing
    assert tracker.get_run(parent_id).status == "KILLED"
