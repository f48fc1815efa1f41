"""How a sweep learns each job's end (issue 50), unit by unit: waiting for Slurm jobs with a bound
(a fake queue and clock: no Slurm, no wall-clock time), what squeue and sacct answers mean, the
launcher's record of each job's end, and the summary's word for each cell's end. The same on a
real Slurm and Ray: tests/cluster/."""

from __future__ import annotations

import json
import socket
import subprocess
from dataclasses import asdict

import pytest

from hydra_plugins.medexp_grid_sweeper.job_ends import JobEnd, ended_without_result, read_job_ends, record_job_ends
from hydra_plugins.medexp_grid_sweeper.medexp_grid_sweeper import JOBS_FILE
from hydra_plugins.medexp_slurm_launcher.slurm_queue import JobState, SlurmQueue, WaitBounds, wait_for_jobs
from medexp.runner.cell_run import CellOutcome
from medexp.runner.sweep import SweepParentRun, collect, write_outcome
from medexp.tracking.tags import process_tags
from tests.runner.test_sweep_truth import _tracker, sweep_config

KEY = "model=a,bench=demo,detector=exch,control=none"


class Job:
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id


class Clock:
    """Time that moves only when the waiting code sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Queue:
    """A SlurmQueue whose answer at each poll comes from ``script(poll number)``: {job id: state},
    or None for a controller that does not answer."""

    def __init__(self, script) -> None:
        self.script, self.polls = script, 0

    def states(self, job_ids):
        self.polls += 1
        answer = self.script(self.polls)
        return None if answer is None else {job_id: JobState(state) for job_id, state in answer.items()}


BOUNDS = WaitBounds(poll_s=5.0, lost_s=30.0, silent_s=600.0)


def wait(script, jobs=("7_0",), results=()):
    clock = Clock()
    waits = wait_for_jobs([Job(job_id) for job_id in jobs], Queue(script), lambda job: job.job_id in results,
                          BOUNDS, clock=clock, sleep=clock.sleep)
    return waits, clock.now


# ------------------------------------------------------------------ waiting for Slurm jobs


def test_a_job_with_a_result_file_is_done_without_asking_slurm():
    waits, elapsed = wait(lambda poll: pytest.fail("squeue asked"), results={"7_0"})
    assert waits[0].result and not waits[0].ended and elapsed == 0


def test_a_cancelled_job_without_a_result_ends_once_its_state_has_lasted_the_bound():
    states = {1: "RUNNING", 2: "RUNNING"}
    waits, elapsed = wait(lambda poll: {"7_0": states.get(poll, "CANCELLED")})
    (job,) = waits
    assert not job.result and job.state == "CANCELLED"
    assert job.ended == "ended CANCELLED without a result (RUNNING -> CANCELLED)"
    assert elapsed == 10.0 + 30.0  # seen CANCELLED at 10 s, ended 30 s later


def test_a_job_slurm_no_longer_knows_ends_after_the_bound_without_accounting():
    # What used to wait forever: squeue has dropped the job (MinJobAge) and there is no sacct.
    waits, elapsed = wait(lambda poll: {"7_0": "RUNNING"} if poll == 1 else {})
    assert waits[0].ended.startswith("left the queue without a result (RUNNING; unknown to squeue and sacct")
    assert elapsed == 5.0 + 30.0


def test_a_node_failure_that_requeues_the_job_is_not_an_end():
    # NODE_FAIL for 25 s, the requeued job pends, runs again and writes its result at 200 s.
    def script(poll):
        return {"7_0": "RUNNING" if poll == 1 else "NODE_FAIL" if poll <= 6 else "PENDING" if poll <= 20 else "RUNNING"}

    clock = Clock()
    (job,) = wait_for_jobs([Job("7_0")], Queue(script), lambda job: clock.now >= 200, BOUNDS,
                           clock=clock, sleep=clock.sleep)
    assert job.result and not job.ended
    assert job.seen == ["RUNNING", "NODE_FAIL", "PENDING", "RUNNING"]


def test_a_slurm_that_does_not_answer_gives_up_on_the_jobs_only_after_the_longer_bound_unconfirmed():
    waits, elapsed = wait(lambda poll: None)
    assert waits[0].given_up == "Slurm did not answer for 600 s (last state SUBMITTED)"
    assert not waits[0].ended and not waits[0].confirmed  # given up on is not ended: it is to be cancelled
    assert elapsed == 600.0


def test_each_job_of_an_array_ends_on_its_own():
    script = lambda poll: {"7_0": "RUNNING" if poll < 3 else "TIMEOUT", "7_1": "RUNNING"}  # noqa: E731
    clock, results = Clock(), set()

    def has_result(job):
        if clock.now >= 100:  # 7_1 finishes at 100 s
            results.add("7_1")
        return job.job_id in results

    waits = wait_for_jobs([Job("7_0"), Job("7_1")], Queue(script), has_result, BOUNDS, clock=clock, sleep=clock.sleep)
    assert waits[0].ended == "ended TIMEOUT without a result (RUNNING -> TIMEOUT)" and not waits[0].result
    assert waits[1].result and not waits[1].ended


# ------------------------------------------------------------------ what squeue and sacct answers mean


def answers(**by_command):
    """A subprocess.run for SlurmQueue: each command's (returncode, stdout, stderr) by its name."""
    asked = []

    def run(command, **kwargs):
        asked.append(command[0])
        code, out, err = by_command[command[0]]
        return subprocess.CompletedProcess(command, code, out, err)

    return run, asked


def test_squeue_lists_array_tasks_and_sacct_names_the_ones_squeue_dropped_ranges_task_by_task():
    run, asked = answers(squeue=(0, "7_1|RUNNING|None\n7_2|PENDING|ReqNodeNotAvail, UnavailableNodes:vm\n", ""),
                         sacct=(0, "7_0|CANCELLED by 0\n7_[3-4]|PENDING\n7_5|COMPLETED\n", ""))
    states = SlurmQueue(run).states(["7_0", "7_1", "7_2"])
    assert {job_id: (s.state, s.reason) for job_id, s in states.items()} == {
        "7_0": ("CANCELLED", ""), "7_1": ("RUNNING", ""), "7_2": ("PENDING", "ReqNodeNotAvail, UnavailableNodes:vm"),
        "7_3": ("PENDING", ""), "7_4": ("PENDING", ""), "7_5": ("COMPLETED", "")}
    assert asked == ["squeue", "sacct"]


def test_tasks_cancelled_while_pending_are_named_by_their_arrays_record():
    # As slurm-wlm 22.05 answers once every pending task of array 7 is cancelled: one record, "7".
    run, asked = answers(squeue=(0, "7|CANCELLED|JobHeldUser\n", ""))
    states = SlurmQueue(run).states(["7_0", "7_1"])
    assert {job_id: s.state for job_id, s in states.items()} == {"7": "CANCELLED", "7_0": "CANCELLED",
                                                                "7_1": "CANCELLED"}
    assert asked == ["squeue"]


def test_without_accounting_a_job_squeue_dropped_is_simply_unknown():
    run, _ = answers(squeue=(1, "", "slurm_load_jobs error: Invalid job id specified"),
                     sacct=(1, "", "sacct: error: Slurm accounting storage is disabled"))
    assert SlurmQueue(run).states(["7_0"]) == {}


def test_a_controller_that_does_not_answer_is_no_answer():
    run, asked = answers(squeue=(1, "", "slurm_load_jobs error: Unable to contact slurm controller"))
    assert SlurmQueue(run).states(["7_0"]) is None and asked == ["squeue"]


# ------------------------------------------------------------------ the launcher's record, and Hydra


def test_a_job_ended_without_a_result_is_failed_but_its_return_value_is_not_raised(tmp_path):
    end = JobEnd(3, "7_3", "NODE_FAIL", False, "ended NODE_FAIL without a result (RUNNING -> NODE_FAIL)")
    job_return = ended_without_result(["model=d"], end)
    assert job_return.status.name == "FAILED"
    assert job_return.return_value == end  # what Hydra's sweeper reads after each batch: no raise
    record_job_ends(tmp_path, {3: end})
    record_job_ends(tmp_path, {4: JobEnd(4, "8_0", "RUNNING", True)})  # a second batch adds to the record
    # compared by fields: Hydra's plugin scan executes this module again, so a test that ran a scan
    # before this one leaves read_job_ends making instances of another JobEnd class object
    assert {num: asdict(read) for num, read in read_job_ends(tmp_path).items()} == {
        3: asdict(end), 4: asdict(JobEnd(4, "8_0", "RUNNING", True))}
    assert end.describe() == "7_3 ended NODE_FAIL without a result (RUNNING -> NODE_FAIL)"


# ------------------------------------------------------------------ the summary's word for each cell's end


def test_the_summary_names_each_cells_end_and_what_the_launcher_saw(tmp_path):
    (tmp_path / JOBS_FILE).write_text(json.dumps([{"num": n, "overrides": [f"model={m}"]} for n, m in enumerate("abcdef")]))
    keys = [KEY.replace("model=a", f"model={m}") for m in "abcdef"]
    write_outcome(tmp_path / "0", CellOutcome(keys[0], "r0", "FINISHED", {"p_value": 0.5}), 0, ["model=a"], "p")
    write_outcome(tmp_path / "1", CellOutcome(keys[1], None, "KILLED", {}, "interrupted by SIGTERM"), 1, [], "p")
    write_outcome(tmp_path / "2", CellOutcome(keys[2], None, "RUNNING", {}), 2, [], "p")
    write_outcome(tmp_path / "3", CellOutcome(keys[3], "r3", "FINISHED", {"p_value": 0.1}), 3, [], "p", attempt=2)
    write_outcome(tmp_path / "4", CellOutcome(keys[4], None, "REQUEUED", {}, "interrupted by SIGUSR2; its job was "
                                                                          "requeued"), 4, [], "p")
    record_job_ends(tmp_path, {1: JobEnd(1, "7_1", "CANCELLED", False, "ended CANCELLED without a result"),
                               2: JobEnd(2, "7_2", "NODE_FAIL", False, "ended NODE_FAIL without a result")})
    summary = collect(tmp_path)
    assert not summary.ok
    metrics = summary.metrics()
    assert {key: metrics[key] for key in ("n_cells", "n_computed", "n_killed", "n_lost", "n_requeued")} == {
        "n_cells": 6.0, "n_computed": 2.0, "n_killed": 2.0, "n_lost": 2.0, "n_requeued": 2.0}
    assert summary.text().splitlines() == [
        "6 cells: 2 computed, 0 reused (tracked earlier), 0 failed, 2 killed, 2 lost, 2 requeued or retried "
        "(ran more than once)",
        f"  KILLED {keys[1]}: interrupted by SIGTERM; launcher: job 7_1 ended CANCELLED without a result (job 1)",
        f"  LOST {keys[2]}: started (attempt 1) and never reported; launcher: job 7_2 ended NODE_FAIL without a "
        "result (job 2)",
        f"  COMPUTED {keys[3]}: attempt 2 (job 3, run r3)",
        f"  REQUEUED {keys[4]}: interrupted by SIGUSR2; its job was requeued (job 4)",
        "  LOST job 5 (model=f): it wrote no outcome",
    ]
    assert json.loads(summary.to_json())["job_ends"]["2"]["state"] == "NODE_FAIL"
    assert f"| 2 | `{keys[2]}` | LOST |" in summary.markdown()


def test_a_cell_whose_job_slurm_did_not_confirm_ended_is_in_an_unknown_state_not_lost(tmp_path):
    (tmp_path / JOBS_FILE).write_text(json.dumps([{"num": n, "overrides": [f"model={m}"]} for n, m in enumerate("abc")]))
    keys = [KEY.replace("model=a", f"model={m}") for m in "abc"]
    write_outcome(tmp_path / "0", CellOutcome(keys[0], None, "RUNNING", {}), 0, [], "p")
    write_outcome(tmp_path / "2", CellOutcome(keys[2], None, "RUNNING", {}), 2, [], "p")
    silent = "Slurm did not answer for 600 s (last state RUNNING); cancelled, but Slurm did not show its end"
    record_job_ends(tmp_path, {0: JobEnd(0, "7_0", "RUNNING", False, silent, confirmed=False),
                               1: JobEnd(1, "7_1", "PENDING", False, silent, confirmed=False),
                               2: JobEnd(2, "7_2", "CANCELLED", False, "ended CANCELLED without a result")})
    summary = collect(tmp_path)
    assert not summary.ok
    assert {key: summary.metrics()[key] for key in ("n_lost", "n_unknown")} == {"n_lost": 1.0, "n_unknown": 2.0}
    assert summary.text().splitlines() == [
        "3 cells: 0 computed, 0 reused (tracked earlier), 0 failed, 1 lost, 2 jobs in an unknown state",
        f"  UNKNOWN {keys[0]}: started (attempt 1); Slurm did not confirm its job ended, so its run stays RUNNING; "
        f"launcher: job 7_0 {silent} (job 0)",
        f"  LOST {keys[2]}: started (attempt 1) and never reported; launcher: job 7_2 ended CANCELLED without a "
        "result (job 2)",
        f"  UNKNOWN job 1 (model=b): it wrote no outcome; launcher: job 7_1 {silent}",
    ]
    assert f"| 0 | `{keys[0]}` | UNKNOWN |" in summary.markdown() and "| 1 | `model=b` | UNKNOWN |" in summary.markdown()
    assert json.loads(summary.to_json())["job_ends"]["0"]["confirmed"] is False


# ------------------------------------------------------------------ runs left RUNNING at the sweep's end


def _sweep_with_a_running_cell_elsewhere(tmp_path, launched_and_ended: bool):
    """A sweep's callback opened on a sqlite store, with a cell run RUNNING under it on another host
    (a node whose job ended without ending the run), and one job launched."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    callback = SweepParentRun()
    callback.on_multirun_start(sweep_config(tmp_path, uri))
    parent = callback._open.run_id
    tracker = _tracker(tmp_path)
    orphan = tracker.start(KEY, {"medexp.cell_key": KEY}, {}, parent_run_id=parent)
    tracker.set_tags(orphan, {**process_tags(), "medexp.host": socket.gethostname() + "-node"})
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir(exist_ok=True)
    (sweep_dir / JOBS_FILE).write_text(json.dumps([{"num": 0, "overrides": ["model=a"]}]))
    if launched_and_ended:
        record_job_ends(sweep_dir, {0: JobEnd(0, "7_0", "NODE_FAIL", False, "ended NODE_FAIL without a result")})
    return callback, tracker, orphan, uri


def test_once_the_launcher_returned_a_cell_run_left_running_on_any_host_ends_killed(tmp_path, capsys):
    callback, tracker, orphan, uri = _sweep_with_a_running_cell_elsewhere(tmp_path, launched_and_ended=True)
    with pytest.raises(SystemExit):
        callback.on_multirun_end(sweep_config(tmp_path, uri))
    run = tracker.get_run(orphan)
    assert run.status == "KILLED" and "its job ended without ending the run" in run.tags["medexp.error"]
    assert "1 stale RUNNING runs ended" in capsys.readouterr().out


@pytest.mark.parametrize("ended", [True, False])
def test_a_stopped_sweep_ends_another_hosts_run_only_when_its_launcher_saw_every_job_end(tmp_path, ended):
    callback, tracker, orphan, _ = _sweep_with_a_running_cell_elsewhere(tmp_path, launched_and_ended=ended)
    callback._end_aborted()
    assert tracker.get_run(orphan).status == ("KILLED" if ended else "RUNNING")
