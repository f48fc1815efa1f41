"""The Slurm launcher's launch, wait and cancel (issue 57) against a scripted Slurm: sbatch, squeue,
sacct and scancel as executables on a temporary PATH (tests/runner/fake_slurm.py), so submitit's
sbatch call and the launcher's own calls run as on a cluster. Each job state and pending reason
the wait bounds, a controller that stops answering (and comes back, or not), a missing command,
a stopped driver, and the sweep's end, which leaves the run of a job whose end Slurm did not
confirm RUNNING. Bounds of tenths of a second; states counted in squeue calls. On a real Slurm:
tests/cluster/."""

from __future__ import annotations

import json
import pickle
import socket
import time
from dataclasses import asdict

import pytest
from hydra.core.utils import JobReturn, JobStatus

from hydra_plugins.medexp_grid_sweeper.job_ends import read_job_ends
from hydra_plugins.medexp_grid_sweeper.medexp_grid_sweeper import JOBS_FILE
from hydra_plugins.medexp_slurm_launcher.slurm_queue import WaitBounds, pending_kind
from medexp.config import conf_dir
from medexp.runner.cell_run import CellOutcome
from medexp.runner.sweep import SweepParentRun, write_outcome
from medexp.tracking.tags import process_tags
from tests.runner.fake_slurm import COMMANDS, FOREVER, FakeSlurm
from tests.runner.test_sweep_truth import _tracker, sweep_config

# Hydra checks our submitit_slurm.yaml against the plugin's schema of that name and warns that this
# is deprecated; medexp silences it at import, pytest's own filters bring it back.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:\s*'hydra/launcher/\w+' is validated against ConfigStore schema:UserWarning"
)

# Small enough for a fast suite, and each several polls long (a poll sleeps poll_s and runs squeue).
TINY = {"poll_s": 0.02, "lost_s": 0.1, "result_grace_s": 0.3, "completing_grace_s": 0.3, "held_s": 0.3,
        "unrunnable_s": 0.3, "limit_s": 0.3, "silent_s": 0.5, "cancel_wait_s": 0.5}
RUNS = ("RUNNING", "", 2)  # a step of two polls running


def _never_called(cfg):  # the cells' task: the fake Slurm runs no job, the test writes its result
    raise AssertionError("a cell ran in the driving process")


class Sweep:
    """A launcher made as Hydra makes it (hydra/launcher=submitit_slurm, the wait's bounds as
    overrides) over a fake Slurm in ``tmp_path``."""

    def __init__(self, tmp_path, monkeypatch, **wait) -> None:
        self.dir = tmp_path / "sweep"
        self.slurm = FakeSlurm(tmp_path / "slurm")
        self.tmp_path, self.monkeypatch, self.wait = tmp_path, monkeypatch, {**TINY, **wait}

    def result(self, task: int) -> dict:
        """Arguments of FakeSlurm.job: task ``task``'s result file (what submitit writes)."""
        source = self.tmp_path / f"result_{task}.pkl"
        returned = JobReturn(overrides=[f"model=m{task}"], status=JobStatus.COMPLETED, _return_value=f"cell {task}")
        source.write_bytes(pickle.dumps(("success", returned)))
        return {"result_file": source, "result_to": f"{self.dir}/.submitit/{{job_id}}/{{job_id}}_0_result.pkl"}

    def launcher(self, commands=COMMANDS):
        """The launcher, set up; with fewer ``commands``, the fake's are the only ones on PATH."""
        from hydra import compose, initialize_config_dir
        from hydra.utils import instantiate

        self.monkeypatch.setenv("PATH", self.slurm.install(commands, alone=set(commands) != set(COMMANDS)))
        overrides = ["hydra/launcher=submitit_slurm", f"hydra.sweep.dir={self.dir}", "hydra.launcher.gpus_per_node=0",
                     *[f"hydra.launcher.wait.{name}={value}" for name, value in self.wait.items()]]
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
        launcher = instantiate(cfg.hydra.launcher)
        launcher.setup(hydra_context=None, task_function=_never_called, config=cfg)
        return launcher

    def launch(self, n_jobs: int):
        """Launch ``n_jobs`` cells; their returns, recorded ends (as dicts) and the seconds it took."""
        launcher = self.launcher()
        started = time.monotonic()
        returns = launcher.launch([[f"model=m{task}"] for task in range(n_jobs)], initial_job_idx=0)
        elapsed = time.monotonic() - started
        return returns, {num: asdict(end) for num, end in read_job_ends(self.dir).items()}, elapsed

    def polls_before_scancel(self) -> int:
        """How many squeue calls came before the first scancel."""
        calls = [call[0] for call in self.slurm.calls()]
        return calls[:calls.index("scancel")].count("squeue")


@pytest.fixture
def sweep(tmp_path, monkeypatch):
    return Sweep(tmp_path, monkeypatch)


def end(state, result, detail="", confirmed=True, reason="", num=0, job_id="7"):
    """A recorded end as a dict; ``job_id``: 7 for a job submitted alone, 7_<task> in an array."""
    return {"num": num, "job_id": job_id, "state": state, "result": result, "detail": detail,
            "confirmed": confirmed, "reason": reason}


# ------------------------------------------------------------------ jobs that end


def test_finished_jobs_return_their_results_and_are_recorded_in_their_final_state(sweep):
    # The result file appears while squeue still says RUNNING; the record holds COMPLETED, seen after.
    for task in (0, 1):
        sweep.slurm.job(task, ("PENDING", "Priority", 1), RUNS, ("COMPLETING", "", 1), ("COMPLETED", "", FOREVER),
                        result_at=3, **sweep.result(task))
    returns, ends, _ = sweep.launch(2)
    assert [r.return_value for r in returns] == ["cell 0", "cell 1"]
    assert ends == {0: end("COMPLETED", True, job_id="7_0"), 1: end("COMPLETED", True, num=1, job_id="7_1")}
    assert not sweep.slurm.calls("scancel")
    assert len(sweep.slurm.calls("sbatch")) == 1  # one array, submitted by submitit through the PATH's sbatch


def test_a_job_cancelled_by_someone_else_ends_without_a_result_confirmed_and_not_cancelled_again(sweep):
    sweep.slurm.job(0, RUNS, ("CANCELLED", "", FOREVER))
    (returned,), ends, _ = sweep.launch(1)
    assert returned.status == JobStatus.FAILED and returned.return_value.state == "CANCELLED"
    assert ends[0] == end("CANCELLED", False, "ended CANCELLED without a result (RUNNING -> CANCELLED)")
    assert not sweep.slurm.calls("scancel")


@pytest.mark.parametrize("accounting", [False, True])
def test_a_job_the_controller_forgot_ends_by_sacct_or_as_unknown_to_both(sweep, accounting):
    sweep.slurm.cluster["accounting"] = accounting
    sweep.slurm.job(0, RUNS, ("TIMEOUT", "", 1), ("", "", FOREVER))  # squeue drops it (MinJobAge) a poll later
    _, ends, _ = sweep.launch(1)
    if accounting:
        assert ends[0]["detail"] == "ended TIMEOUT without a result (RUNNING -> TIMEOUT)"
    else:
        assert ends[0]["detail"] == ("left the queue without a result (RUNNING -> TIMEOUT; unknown to squeue and sacct "
                                     "for 0.1 s)")
    assert ends[0]["confirmed"] and not sweep.slurm.calls("scancel")


def test_a_completed_job_whose_result_file_shows_late_within_the_grace_has_its_result(tmp_path, monkeypatch):
    sweep = Sweep(tmp_path, monkeypatch, result_grace_s=30)  # a network filesystem's late file
    sweep.slurm.job(0, RUNS, ("COMPLETED", "", FOREVER), result_at=12, **sweep.result(0))
    (returned,), ends, _ = sweep.launch(1)
    assert returned.return_value == "cell 0" and ends[0] == end("COMPLETED", True)


def test_a_completed_job_without_a_result_file_past_the_grace_ends_without_one(sweep):
    sweep.slurm.job(0, RUNS, ("COMPLETED", "", FOREVER))
    _, ends, elapsed = sweep.launch(1)
    assert ends[0] == end("COMPLETED", False, "ended COMPLETED without a result (RUNNING -> COMPLETED; no result "
                                              "file 0.3 s after its end)")
    assert elapsed >= TINY["result_grace_s"] and not sweep.slurm.calls("scancel")


# ------------------------------------------------------------------ jobs the wait gives up on: cancelled, confirmed


def test_a_held_job_is_cancelled_within_its_bound_and_named_with_its_reason(sweep):
    sweep.slurm.job(0, ("PENDING", "JobHeldAdmin", FOREVER))
    sweep.slurm.job(1, RUNS, ("COMPLETED", "", FOREVER), result_at=2, **sweep.result(1))
    (held, done), ends, elapsed = sweep.launch(2)
    assert done.return_value == "cell 1" and held.status == JobStatus.FAILED
    assert ends[0] == end("CANCELLED", False, "held (JobHeldAdmin) for 0.3 s; cancelled, and Slurm shows it ended "
                                              "(CANCELLED)", reason="JobHeldAdmin", job_id="7_0")
    assert sweep.slurm.calls("scancel") == [["scancel", "7_0"]]  # the held task, not its array
    assert TINY["held_s"] <= elapsed < TINY["held_s"] + 10


@pytest.mark.parametrize("reason", ["PartitionTimeLimit", "QOSMaxWallDurationPerJobLimit",
                                    "ReqNodeNotAvail, UnavailableNodes:node[1-4]", "BadConstraints"])
def test_a_job_that_cannot_run_as_submitted_is_cancelled_and_named(sweep, reason):
    sweep.slurm.job(0, ("PENDING", "Priority", 2), ("PENDING", reason, FOREVER))
    _, ends, _ = sweep.launch(1)
    assert ends[0]["detail"] == f"cannot run as submitted ({reason}) for 0.3 s; cancelled, and Slurm shows it ended " \
                                "(CANCELLED)"
    assert ends[0]["reason"] == reason and ends[0]["confirmed"] and ends[0]["state"] == "CANCELLED"


def test_a_job_pending_on_a_limit_is_waited_for_while_the_sweep_runs_then_given_up(sweep):
    # Task 1 runs for 20 polls (far past limit_s), holding the group's CPUs; task 0 waits for them.
    sweep.slurm.job(0, ("PENDING", "AssocGrpCpuLimit", FOREVER))
    sweep.slurm.job(1, ("RUNNING", "", 20), ("COMPLETED", "", FOREVER), result_at=20, **sweep.result(1))
    (limited, done), ends, _ = sweep.launch(2)
    assert done.return_value == "cell 1"
    assert ends[0]["detail"].startswith("pending on a limit (AssocGrpCpuLimit) for 0.3 s while no job of the sweep ran")
    assert sweep.polls_before_scancel() > 20  # not while task 1 ran


def test_a_job_stuck_completing_is_cancelled_and_left_unconfirmed_when_slurm_still_shows_it(sweep):
    sweep.slurm.job(0, RUNS, ("COMPLETING", "", FOREVER), on_cancel=[("COMPLETING", "", FOREVER)])
    (returned,), ends, _ = sweep.launch(1)
    assert returned.status == JobStatus.FAILED
    why = ("still COMPLETING 0.3 s after it began to end; cancelled, but Slurm did not show its end within 0.5 s "
           "(last state COMPLETING): it may still run")
    assert ends[0] == end("COMPLETING", False, why, confirmed=False)


# ------------------------------------------------------------------ a controller that does not answer


def test_a_controller_that_stops_answering_and_comes_back_within_the_bound_changes_nothing(tmp_path, monkeypatch):
    sweep = Sweep(tmp_path, monkeypatch, silent_s=30)
    sweep.slurm.job(0, ("RUNNING", "", 10), ("COMPLETED", "", FOREVER), result_at=10, **sweep.result(0))
    sweep.slurm.silent(2, 7)
    (returned,), ends, _ = sweep.launch(1)
    assert returned.return_value == "cell 0" and ends[0] == end("COMPLETED", True)
    assert not sweep.slurm.calls("scancel")


def test_a_controller_silent_past_the_bound_leaves_the_job_unconfirmed_not_ended(sweep):
    sweep.slurm.job(0, ("RUNNING", "", FOREVER))
    sweep.slurm.silent(3)
    (returned,), ends, _ = sweep.launch(1)
    assert returned.status == JobStatus.FAILED
    assert ends[0] == end("RUNNING", False, "Slurm did not answer for 0.5 s (last state RUNNING); cancelled, but Slurm "
                                            "did not show its end within 0.5 s (last state RUNNING): it may still run",
                          confirmed=False)
    assert sweep.slurm.calls("scancel")  # tried: the controller refused it


def test_a_controller_back_after_the_bound_takes_the_cancel_and_confirms_the_end(tmp_path, monkeypatch):
    # Silent for polls 2 to 12 (past silent_s 0.2 s: 10 sleeps of 0.05 s), back before cancel_wait_s.
    sweep = Sweep(tmp_path, monkeypatch, poll_s=0.05, silent_s=0.2, cancel_wait_s=30)
    sweep.slurm.job(0, ("RUNNING", "", FOREVER))
    sweep.slurm.silent(2, 12)
    _, ends, _ = sweep.launch(1)
    assert ends[0]["detail"].startswith("Slurm did not answer for 0.2 s (last state RUNNING); cancelled, and Slurm "
                                        "shows it ended (CANCELLED)")
    assert ends[0]["confirmed"] and ends[0]["state"] == "CANCELLED"
    assert len(sweep.slurm.calls("scancel")) >= 2  # refused while silent, taken once back


# ------------------------------------------------------------------ a missing command, a stopped driver


def test_a_driver_without_slurm_commands_fails_at_setup_in_one_line(sweep, capsys):
    started = time.monotonic()
    with pytest.raises(SystemExit) as stop:
        sweep.launcher(commands=("sbatch", "srun", "squeue"))
    assert stop.value.code == 2 and time.monotonic() - started < 10
    error = capsys.readouterr().err.strip()
    assert error.startswith("medexp: error: sacct, scancel not found on PATH") and "\n" not in error
    assert not sweep.slurm.calls()


def test_a_stopped_driver_cancels_its_jobs_and_records_their_confirmed_ends(tmp_path, monkeypatch):
    sweep = Sweep(tmp_path, monkeypatch)
    sweep.slurm.job(0, ("RUNNING", "", FOREVER), on_cancel=[("COMPLETING", "", 1), ("CANCELLED", "", FOREVER)])
    sweep.slurm.job(1, ("PENDING", "Resources", FOREVER))
    sweep.slurm.cluster["interrupt_at"] = 3  # SIGINT to the driver at the third squeue
    launcher = sweep.launcher()
    with pytest.raises(KeyboardInterrupt):
        launcher.launch([["model=m0"], ["model=m1"]], initial_job_idx=0)
    assert sweep.slurm.calls("scancel") == [["scancel", "7_0", "7_1"]]
    ends = {num: asdict(e) for num, e in read_job_ends(sweep.dir).items()}
    why = "cancelled when the sweep was stopped; cancelled, and Slurm shows it ended (CANCELLED)"
    assert ends[0] == end("CANCELLED", False, why, job_id="7_0")
    assert ends[1] == end("CANCELLED", False, why, num=1, job_id="7_1")


# ------------------------------------------------------------------ the bounds, the reasons


def test_the_bounds_are_checked():
    assert WaitBounds().held_s == 3600.0
    for bad, message in [({"poll_s": 0}, "poll_s must be > 0"), ({"lost_s": -1}, "lost_s must be >= 0"),
                         ({"held_s": float("inf")}, "held_s must be a number of seconds")]:
        with pytest.raises(ValueError, match=message):
            WaitBounds(**bad)


@pytest.mark.parametrize("reason, kind", [
    ("JobHeldAdmin", "held"), ("JobHeldUser", "held"), ("PartitionTimeLimit", "unrunnable"),
    ("ReqNodeNotAvail, UnavailableNodes:vm", "unrunnable"), ("QOSMaxWallDurationPerJobLimit", "unrunnable"),
    ("AssocMaxNodePerJobLimit", "unrunnable"), ("QOSMinGRES", "unrunnable"), ("BadConstraints", "unrunnable"),
    ("AssocGrpCpuLimit", "limit"), ("QOSMaxJobsPerUserLimit", "limit"), ("AssocMaxJobsLimit", "limit"),
    ("Priority", None), ("Resources", None), ("BeginTime", None), ("Dependency", None), ("JobArrayTaskLimit", None),
])
def test_pending_reasons_the_wait_bounds(reason, kind):
    assert pending_kind(reason) == kind


# ------------------------------------------------------------------ the sweep's end


def test_the_sweep_ends_the_run_of_a_confirmed_job_and_leaves_an_unconfirmed_ones_running(sweep, capsys):
    """Task 1 is cancelled by someone (confirmed); then the controller goes silent past its bound
    while task 0 runs: task 0 is not confirmed ended, and its cell's run, on another host, stays
    RUNNING while task 1's ends KILLED; the summary says one job is in an unknown state."""
    uri = f"sqlite:///{sweep.tmp_path / 'mlflow.db'}"
    callback = SweepParentRun()
    callback.on_multirun_start(sweep_config(sweep.tmp_path, uri))
    tracker = _tracker(sweep.tmp_path)
    keys = [f"model=m{task},bench=demo,detector=exch,control=none" for task in (0, 1)]
    runs = []
    for task, key in enumerate(keys):
        run = tracker.start(key, {"medexp.cell_key": key}, {}, parent_run_id=callback._open.run_id)
        tracker.set_tags(run, {**process_tags(), "medexp.host": socket.gethostname() + "-node",
                               "medexp.slurm_job_id": f"7_{task}"})
        write_outcome(sweep.dir / str(task), CellOutcome(key, None, "RUNNING", {}), task, [f"model=m{task}"], "p")
        runs.append(run)
    (sweep.dir / JOBS_FILE).write_text(json.dumps([{"num": n, "overrides": [f"model=m{n}"]} for n in (0, 1)]))
    sweep.wait.update(poll_s=0.05)
    sweep.slurm.job(0, ("RUNNING", "", FOREVER))
    sweep.slurm.job(1, ("RUNNING", "", 1), ("CANCELLED", "", FOREVER))
    sweep.slurm.silent(12)  # CANCELLED seen for 10 polls of 0.05 s, past lost_s, before the silence
    sweep.launch(2)
    with pytest.raises(SystemExit):
        callback.on_multirun_end(sweep_config(sweep.tmp_path, uri))
    assert tracker.get_run(runs[0]).status == "RUNNING"
    assert tracker.get_run(runs[1]).status == "KILLED"
    out = capsys.readouterr().out
    assert "2 cells: 0 computed, 0 reused (tracked earlier), 0 failed, 1 lost, 1 job in an unknown state" in out
    assert f"  UNKNOWN {keys[0]}: started (attempt 1); Slurm did not confirm its job ended, so its run stays " \
           "RUNNING; launcher: job 7_0 Slurm did not answer" in out
