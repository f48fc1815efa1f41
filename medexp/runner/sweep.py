"""Sweeps (``python -m medexp -m ...``): a parent MLflow run per sweep, with its cells nested under it.

The Hydra callback :class:`SweepParentRun` opens the parent run in the process that drives the
sweep. Each cell, in whatever process or machine the launcher runs it (a joblib worker, a
submitit subprocess, a Slurm node), finds that parent in the tracking store by its sweep
directory tag (environment variables do not reach Slurm or Ray workers), nests its run under it
and writes its outcome as JSON into its job directory (RUNNING when it starts, then how it ended).
When the launcher returns, the callback ends the cell runs its jobs left RUNNING, collects those
files with the launcher's record of each job's end (medexp's Slurm and Ray launchers write one),
prints the summary naming each cell's end, logs it to the parent run and ends the parent
FINISHED, or FAILED when a cell did not finish (failed, killed, or lost: its job reported nothing).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.medexp_grid_sweeper.job_ends import ENDS_FILE, JobEnd, read_job_ends
from hydra_plugins.medexp_grid_sweeper.medexp_grid_sweeper import JOBS_FILE, read_launched_jobs
from medexp.kernel.atomic import atomic_write_bytes
from medexp.kernel.cell import Cell
from medexp.runner.cell_run import CellOutcome, run_cell
from medexp.runner.signals import exit_status, last_signal, signal_name, signals_raise, signals_received
from medexp.tracking import ReconciledRun, Tracker, TrackingUnavailable, ui_command

log = logging.getLogger("medexp")

OUTCOME_FILE = "medexp_cell.json"  # a cell's outcome, in its job output directory
SWEEP_TAGS = ("medexp.kind", "medexp.sweep_dir")  # the parent run: kind=sweep, the absolute sweep dir
SUMMARY_FILES = ("sweep_summary.md", "sweep_summary.json")  # in the sweep dir and in the parent run
# After a signal, how long the driving process waits for the cells it started to end their runs
# before the launcher kills them (Slurm leaves 30 s between SIGTERM and SIGKILL by default).
STOP_GRACE_S = 20.0


def run_sweep_cell(cfg: DictConfig) -> CellOutcome:
    """One cell of a sweep: nested under the sweep's parent run, its outcome written to its job dir.

    The outcome file says RUNNING from the start (with the attempt's number: a requeued or retried
    job runs the cell again in the same job dir), then how the cell ended. Never raises for an
    error of the cell or of the tracking store: the outcome says FAILED and the sweep goes on. A
    signal ends it KILLED and is raised again (the job exits with 128 + its number), unless the
    launcher's own handler of the signal (submitit's, at a time limit) raised an error, which is
    the job's end: the outcome says KILLED and the job returns it.
    """
    from hydra.core.hydra_config import HydraConfig

    job = HydraConfig.get()
    job_dir = Path(job.runtime.output_dir)
    key = Cell.from_config(cfg).key

    def report(outcome: CellOutcome, parent: str | None) -> None:
        write_outcome(job_dir, outcome, job.job.num, list(job.overrides.task), parent, attempt)

    attempt = _attempt(job_dir)
    report(CellOutcome(key, None, "RUNNING", {}), None)
    signals_before = signals_received()
    parent = None
    try:
        tracker = Tracker(cfg.tracking, cfg.paths.root)
        parent = find_parent_run(tracker, _absolute(job.sweep.dir))
        outcome = run_cell(cfg, parent_run_id=parent, tracker=tracker)
    except Exception as error:
        if signals_received() > signals_before:  # the launcher's handler of the signal raised
            outcome = CellOutcome(key, None, "KILLED", {}, f"interrupted by {last_signal()}; then {error}")
        else:  # the store failed before or around the cell's own run
            log.exception("cell of job %s could not be tracked", job.job.num)
            outcome = CellOutcome(key, None, "FAILED", {}, f"{type(error).__name__}: {error}")
    except BaseException as error:
        received = signal_name(error) or (last_signal() if signals_received() > signals_before else None)
        if isinstance(error, SystemExit) and received:  # submitit's handler requeued the job, then exited
            report(CellOutcome(key, None, "REQUEUED", {}, f"interrupted by {received}; its job was requeued"), parent)
        else:
            report(CellOutcome(key, None, "KILLED", {}, f"interrupted by {received or type(error).__name__}"), parent)
        raise
    report(outcome, parent)
    return outcome


def _attempt(job_dir: Path) -> int:
    """The number of this attempt at the job dir's cell: 1, or one more than an earlier attempt of
    this sweep wrote (outcome files of earlier sweeps are removed when a sweep starts)."""
    try:
        earlier = json.loads((job_dir / OUTCOME_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 1
    return int(earlier.get("attempt", 1)) + 1


def find_parent_run(tracker: Tracker, sweep_dir: str) -> str | None:
    """The id of the running parent run of the sweep in ``sweep_dir`` (the newest if several)."""
    runs = tracker.search(dict(zip(SWEEP_TAGS, ("sweep", sweep_dir))), status="RUNNING")
    if not runs:
        log.warning("no running sweep run for %s in %s: this cell's run is not nested", sweep_dir, tracker.uri)
        return None
    return runs[0].run_id


def write_outcome(job_dir: Path, outcome: CellOutcome, job_num: int, overrides: list[str], sweep_run_id: str | None,
                  attempt: int = 1) -> None:
    """The cell's outcome as JSON in its job directory, written atomically."""
    record = {
        "job": job_num,
        "overrides": overrides,
        "cell_key": outcome.cell_key,
        "status": outcome.status,
        "run_id": outcome.run_id,
        "error": outcome.error,
        "p_value": outcome.metrics.get("p_value"),
        "sweep_run_id": sweep_run_id,
        "attempt": attempt,
    }
    atomic_write_bytes(Path(job_dir) / OUTCOME_FILE, json.dumps(record, indent=1).encode("utf-8"))


# How a cell ended, by its outcome file's status (a launched job without one is lost).
CELL_ENDS = {"FINISHED": "computed", "CACHED": "reused", "SHARED": "shared", "FAILED": "failed", "KILLED": "killed",
             "REQUEUED": "requeued", "RUNNING": "lost"}


@dataclass(frozen=True)
class SweepSummary:
    """What the cells of a sweep reported, the launched jobs that reported nothing, and how the
    launcher saw each job end."""

    outcomes: list[dict[str, Any]]  # one per reporting job, by job number
    lost: list[dict[str, Any]]  # launched jobs ({"num", "overrides"}) without an outcome file
    reconciled: list[ReconciledRun] = field(default_factory=list)  # stale RUNNING runs ended
    job_ends: dict[int, JobEnd] = field(default_factory=dict)  # by job number, from medexp's Slurm and Ray launchers

    def count(self, status: str) -> int:
        return sum(outcome["status"] == status for outcome in self.outcomes)

    def end_of(self, outcome: dict[str, Any]) -> str:
        """The cell's end; "unknown" for a cell that never reported an end whose job the launcher
        gave up on without Slurm confirming its end (it may still run)."""
        if outcome["status"] == "RUNNING" and self._unconfirmed(outcome["job"]):
            return "unknown"
        return CELL_ENDS.get(outcome["status"], outcome["status"].lower())

    def _unconfirmed(self, num: int) -> bool:
        end = self.job_ends.get(num)
        return end is not None and not end.confirmed

    @property
    def ok(self) -> bool:
        """Every cell finished (computed, reused, or its shared work done)."""
        return not self.lost and all(self.end_of(o) in ("computed", "reused", "shared") for o in self.outcomes)

    def metrics(self) -> dict[str, float]:
        ends = [self.end_of(outcome) for outcome in self.outcomes]
        silent = sum(self._unconfirmed(job["num"]) for job in self.lost)  # launched, no outcome, end unconfirmed
        return {
            "n_cells": float(len(self.outcomes) + len(self.lost)),
            "n_computed": float(ends.count("computed")),
            "n_reused": float(ends.count("reused")),
            "n_failed": float(ends.count("failed")),
            "n_killed": float(ends.count("killed") + ends.count("requeued")),
            "n_lost": float(len(self.lost) - silent + ends.count("lost")),
            "n_unknown": float(ends.count("unknown") + silent),
            "n_requeued": float(sum(int(o.get("attempt", 1)) > 1 or o["status"] == "REQUEUED" for o in self.outcomes)),
            "n_shared": float(ends.count("shared")),
            "n_reconciled": float(len(self.reconciled)),
        }

    def headline(self) -> str:
        n = {key: int(value) for key, value in self.metrics().items()}
        text = f"{n['n_cells']} cells: {n['n_computed']} computed, {n['n_reused']} reused (tracked earlier), {n['n_failed']} failed"
        text += f", {n['n_killed']} killed" if n["n_killed"] else ""
        text += f", {n['n_lost']} lost" if n["n_lost"] else ""
        jobs = "job" if n["n_unknown"] == 1 else "jobs"
        text += f", {n['n_unknown']} {jobs} in an unknown state" if n["n_unknown"] else ""
        text += f", {n['n_requeued']} requeued or retried (ran more than once)" if n["n_requeued"] else ""
        text += f", {n['n_shared']} shared-work tasks (nothing tracked)" if n["n_shared"] else ""
        return text + (f"; {n['n_reconciled']} stale RUNNING runs ended" if self.reconciled else "")

    def _launcher_says(self, num: int) -> str:
        end = self.job_ends.get(num)
        return f"; launcher: job {end.describe()}" if end is not None and not end.result else ""

    def _note(self, outcome: dict[str, Any]) -> str:
        """What a cell's line adds to its end: the error, the launcher's word, the attempts."""
        end = self.end_of(outcome)
        started = f"started (attempt {outcome.get('attempt', 1)})"
        note = {"lost": f"{started} and never reported",
                "unknown": f"{started}; Slurm did not confirm its job ended, so its run stays RUNNING"
                }.get(end, outcome["error"] or "")
        note += self._launcher_says(outcome["job"])
        if int(outcome.get("attempt", 1)) > 1:
            note += f"{'; ' if note else ''}attempt {outcome['attempt']}"
        return note

    def text(self) -> str:
        """The headline, then one line per cell that did not finish (its end, why, and what its
        launcher saw), per cell that ran more than once, and per stale run ended."""
        lines = [self.headline()]
        for o in self.outcomes:
            end = self.end_of(o)
            if end in ("computed", "reused", "shared") and int(o.get("attempt", 1)) == 1:
                continue
            run = f", run {o['run_id']}" if o["run_id"] else ""
            lines.append(f"  {end.upper()} {o['cell_key']}: {self._note(o)} (job {o['job']}{run})")
        lines += [f"  {self._lost_end(job)} job {job['num']} ({' '.join(job['overrides'])}): it wrote no outcome"
                  f"{self._launcher_says(job['num'])}" for job in self.lost]
        lines += [f"  {run.status} stale run {run.run_id} ({run.name}): {run.reason}" for run in self.reconciled]
        return "\n".join(lines)

    def _lost_end(self, job: dict[str, Any]) -> str:
        """A launched job without an outcome file: LOST, or UNKNOWN when its end is unconfirmed."""
        return "UNKNOWN" if self._unconfirmed(job["num"]) else "LOST"

    def markdown(self) -> str:
        """The headline and a table of every job: cell, status, p-value, run id, error."""
        rows = ["| job | cell | status | p_value | run_id | error |", "|---|---|---|---|---|---|"]
        for o in self.outcomes:
            p_value = "" if o["p_value"] is None else f"{o['p_value']:.3g}"
            status = self.end_of(o).upper() if self.end_of(o) in ("lost", "unknown") else o["status"]
            rows.append(f"| {o['job']} | `{o['cell_key']}` | {status} | {p_value} | {o['run_id'] or ''} | {self._note(o)} |")
        rows += [
            f"| {job['num']} | `{' '.join(job['overrides'])}` | {self._lost_end(job)} | | | wrote no outcome"
            f"{self._launcher_says(job['num'])} |"
            for job in self.lost
        ]
        rows += [f"| | `{run.name}` | {run.status} (stale) | | {run.run_id} | {run.reason} |" for run in self.reconciled]
        return f"# Sweep summary\n\n{self.headline()}\n\n" + "\n".join(rows) + "\n"

    def to_json(self) -> str:
        reconciled = [vars(run) for run in self.reconciled]
        ends = {str(num): asdict(end) for num, end in sorted(self.job_ends.items())}
        return json.dumps({"metrics": self.metrics(), "cells": self.outcomes, "lost": self.lost,
                           "reconciled": reconciled, "job_ends": ends}, indent=1)


def collect(sweep_dir: str | Path, reconciled: list[ReconciledRun] | None = None) -> SweepSummary:
    """Read the outcome files under ``sweep_dir`` and compare them with the jobs the sweeper launched."""
    sweep_dir = Path(sweep_dir)
    outcomes = sorted(
        (json.loads(path.read_text(encoding="utf-8")) for path in sweep_dir.rglob(OUTCOME_FILE)),
        key=lambda outcome: outcome["job"],
    )
    reported = {outcome["job"] for outcome in outcomes}
    launched = read_launched_jobs(sweep_dir) or []  # absent when another sweeper ran the sweep
    return SweepSummary(outcomes, [job for job in launched if job["num"] not in reported], list(reconciled or []),
                        read_job_ends(sweep_dir))


class SweepParentRun(Callback):
    """Hydra callback (``hydra.callbacks``): a parent MLflow run per sweep and a summary at its end.

    ``fail_exit``: exit with status 1 after the summary when a cell failed or a job was lost, so
    scripts and CI notice; the parent run is FAILED either way.

    Hydra turns an exception of a callback into a warning, so every way this callback stops the
    command is a ``SystemExit``: 2 when the tracking store is unreachable at the start (no cell is
    launched), 1 when a cell did not finish or the parent run could not be opened.
    """

    def __init__(self, fail_exit: bool = True) -> None:
        self.fail_exit = fail_exit
        self._open: _OpenSweep | None = None  # set in the process driving the sweep only
        self._context = ExitStack()  # the heartbeat and signal handlers of the driving process
        self._tracker: Tracker | None = None  # the driving process's client

    def __getstate__(self) -> dict[str, Any]:
        # Launchers pickle callbacks to their workers; the driver's thread, handlers and client stay home.
        return {**self.__dict__, "_context": None, "_tracker": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _context=ExitStack())

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            self._start(config)
        except TrackingUnavailable as error:
            print(f"medexp: error: {error}; no cell was launched", file=sys.stderr)
            raise SystemExit(2) from None
        except Exception as error:
            log.exception("the sweep run could not be opened")
            print(f"medexp: error: the sweep run could not be opened ({type(error).__name__}: {error}); "
                  "no cell was launched", file=sys.stderr)
            raise SystemExit(1) from None

    def _start(self, config: DictConfig) -> None:
        sweep_dir = _absolute(config.hydra.sweep.dir)
        _remove_previous_reports(Path(sweep_dir))
        tracker = Tracker(config.tracking, config.paths.root)
        sweep_tags = dict(zip(SWEEP_TAGS, ("sweep", sweep_dir)))
        reconciled = tracker.reconcile()  # runs a killed process or a lost node left RUNNING
        for stale in tracker.search(sweep_tags, status="RUNNING"):  # left by an interrupted sweep here
            log.warning("ending sweep run %s of an earlier, interrupted sweep in %s as KILLED", stale.run_id, sweep_dir)
            tracker.kill(stale.run_id, "an earlier sweep in the same directory was interrupted")
            reconciled.append(ReconciledRun(stale.run_id, "sweep", "an earlier sweep in this directory was interrupted"))
        overrides = [str(item) for item in config.hydra.overrides.task]
        hydra_node = config.hydra
        run_id = tracker.start(
            f"sweep {time.strftime('%Y-%m-%d %H:%M:%S')}",
            sweep_tags,
            {
                "overrides": " ".join(overrides),
                "sweeper": hydra_node.sweeper._target_,
                "launcher": hydra_node.launcher._target_,
            },
        )
        try:
            sweep_spec = {
                "overrides": overrides,
                "sweeper": OmegaConf.to_container(hydra_node.sweeper, resolve=False),
                "launcher": OmegaConf.to_container(hydra_node.launcher, resolve=False),
            }
            tracker.log_files(run_id, {"sweep.yaml": OmegaConf.to_yaml(sweep_spec)})
        except BaseException as error:  # no cell runs under a parent that is not whole
            tracker.fail(run_id, error)
            raise
        tracking = OmegaConf.to_container(config.tracking, resolve=True)
        self._open = _OpenSweep(run_id, sweep_dir, tracking, str(config.paths.root), reconciled)
        self._tracker = tracker
        # While the launcher runs: a heartbeat (cells on other hosts must not take the parent
        # for lost) and signals as exceptions, raised once the cells this process started have
        # ended their runs, so no run the signal interrupts stays RUNNING.
        self._context.enter_context(tracker.heartbeat(run_id))
        self._context.enter_context(signals_raise(before_raising=self._stop_cells))
        _DRIVING.append(self)
        atexit.register(self._end_aborted)  # Hydra skips on_multirun_end when the sweep raises
        print(f"sweep run {run_id}: cells nest under it (sweep dir {sweep_dir})")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        atexit.unregister(self._end_aborted)
        summary = self._end(aborted=False)
        if self.fail_exit and not summary.ok:
            raise SystemExit(1)

    def _stop_cells(self, signum: int) -> None:
        """Hand the signal to the processes this one started (joblib workers, submitit
        subprocesses, a local Ray), whose cells then end their runs KILLED with it, and wait up to
        ``STOP_GRACE_S`` for those runs to end: the launcher kills its workers outright once the
        exception reaches it. Those still RUNNING then are ended by :meth:`_end`; cells on other
        machines end their own runs when their job is cancelled, or are reconciled by heartbeat."""
        import psutil

        sweep, tracker = self._open, self._tracker
        if sweep is None or tracker is None:
            return
        children = psutil.Process().children(recursive=True)
        for child in children:
            try:
                child.send_signal(signum)
            except psutil.Error:  # already gone
                pass
        pids = {str(child.pid) for child in children}
        if not pids:  # the cells run in this process (the basic launcher): they end their own runs
            return
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            try:
                running = [run for run in tracker.search({"mlflow.parentRunId": sweep.run_id}, status="RUNNING")
                           if run.tags.get("medexp.pid") in pids]
            except Exception:  # the store is down: the runs cannot end now, waiting is in vain
                log.warning("cannot see whether the cells' runs ended: the tracking store does not answer")
                return
            if not running:
                return
            time.sleep(0.5)
        log.warning("cells of this sweep still RUNNING %.0f s after the signal; their runs are ended KILLED here",
                    STOP_GRACE_S)

    def _end_aborted(self) -> None:
        if self._open is None:  # already ended
            return
        try:
            self._end(aborted=True)
        except Exception:  # at interpreter exit: report, never mask the error that stopped the sweep
            log.exception("could not end the sweep run of an aborted sweep")

    def _end(self, aborted: bool) -> SweepSummary:
        """End the cells' runs left RUNNING, collect the outcomes, write the summary into the sweep
        dir, print it, and record it in the parent run, ended FINISHED, FAILED or KILLED. When the
        store refuses, the summary is still printed and written there, and the parent's end is
        noted for the next command on that store (the tracker's pending ends)."""
        sweep = self._open
        assert sweep is not None, "on_multirun_start did not run"
        self._open = None
        if self in _DRIVING:
            _DRIVING.remove(self)
        self._context.close()
        received = last_signal() if aborted else None
        tracker, store_error, orphans = self._tracker, None, []
        try:
            tracker = tracker or Tracker(OmegaConf.create(sweep.tracking), sweep.root)
            orphans = _end_orphans(tracker, sweep, aborted, received)
        except Exception as error:  # the store is down: the parent's end below is noted for the next command
            log.warning("could not end the cells' runs left RUNNING: %s: %s", type(error).__name__, error)
            store_error = error
        summary = collect(sweep.sweep_dir, [*sweep.reconciled, *orphans])
        status = "KILLED" if aborted else ("FINISHED" if summary.ok else "FAILED")
        try:
            local = str(_write_summary(Path(sweep.sweep_dir), summary))
        except OSError as error:  # a full disk, say: the terminal still gets the summary
            log.warning("could not write the sweep summary into %s: %s", sweep.sweep_dir, error)
            local = "the lines above"
        print(f"sweep run {sweep.run_id} {status}{' (aborted)' if aborted else ''}: {summary.text()}")
        try:
            if tracker is None:  # no client could be opened: nothing can be recorded, nor noted
                raise store_error or RuntimeError("no tracking store")
            self._record(tracker, sweep, summary, status, received)
        except Exception as error:
            print(f"medexp: error: the sweep run {sweep.run_id} could not be ended {status} in the tracking store "
                  f"({type(error).__name__}: {error}); the summary is in {local}, and the next medexp command on "
                  "that store ends the run", file=sys.stderr)
            return summary
        print(f"view it: {ui_command(OmegaConf.create(sweep.tracking), sweep.root)}")
        return summary

    @staticmethod
    def _record(tracker: Tracker, sweep: _OpenSweep, summary: SweepSummary, status: str, received: str | None) -> None:
        try:
            tracker.log_metrics(sweep.run_id, summary.metrics())
            tracker.log_files(sweep.run_id, dict(zip(SUMMARY_FILES, (summary.markdown(), summary.to_json()))))
        finally:  # ended even when the summary could not be logged (or noted for the next command)
            if status == "KILLED":
                tracker.kill(sweep.run_id, _stop_reason(received), received)
            else:
                tracker.finish(sweep.run_id, status)


def _stop_reason(received: str | None) -> str:
    return f"interrupted by {received}" if received else "the sweep stopped before its launcher returned"


def _end_orphans(tracker: Tracker, sweep: _OpenSweep, aborted: bool, received: str | None) -> list[ReconciledRun]:
    """End KILLED the cells' runs still RUNNING under the parent whose process has ended. Once every
    launched job has ended (the launcher returned, or medexp's Slurm or Ray launcher saw each job
    end after cancelling it), that is every such run, on any host: a lost node, a job killed past
    its time, a worker gone. Otherwise (a launcher stopped midway) only those on this host whose
    process is gone or among the processes this one is stopping; runs on other hosts are ended by
    the heartbeat check of a later command. A run of a job the launcher gave up on without Slurm
    confirming its end (it may still compute and log) stays RUNNING either way."""
    import psutil

    unconfirmed = frozenset(end.job_id for end in read_job_ends(Path(sweep.sweep_dir)).values() if not end.confirmed)
    if not aborted or _every_job_ended(Path(sweep.sweep_dir)):
        reason = (f"{_stop_reason(received)}; its job ended without ending the run" if aborted else
                  "its job ended without ending the run (a lost node or worker, a kill past a time limit or grace)")
        return tracker.end_orphans(sweep.run_id, reason, received, None, unconfirmed)
    stopping = {child.pid for child in psutil.Process().children(recursive=True)}
    return tracker.end_orphans(sweep.run_id, f"{_stop_reason(received)}, while this cell ran", received, stopping,
                               unconfirmed)


def _every_job_ended(sweep_dir: Path) -> bool:
    """Whether the launcher recorded an end for every launched job (medexp's Slurm and Ray launchers
    do), confirmed or not: the runs of jobs whose end Slurm did not confirm are spared by name."""
    launched, ends = read_launched_jobs(sweep_dir) or [], read_job_ends(sweep_dir)
    return bool(launched) and all(job["num"] in ends for job in launched)


@dataclass(frozen=True)
class _OpenSweep:
    run_id: str
    sweep_dir: str
    tracking: dict[str, Any]  # plain data: the callback object is pickled to launcher workers
    root: str
    reconciled: list[ReconciledRun]  # runs left RUNNING by earlier processes, ended KILLED at the start


_DRIVING: list[SweepParentRun] = []  # the sweeps this process drives and has not ended


def stopped_by(error: BaseException) -> int:
    """A sweep's driving process stopped by a signal (``Interrupted`` or KeyboardInterrupt reached
    the entry): end the sweep it drives (its in-flight cells and the parent KILLED, the summary
    printed), print what happened and return the exit status, 128 + the signal's number."""
    for sweep in list(_DRIVING):
        sweep._end_aborted()
    print(f"medexp: sweep interrupted by {signal_name(error)}; its runs end KILLED, rerun the same command to resume",
          file=sys.stderr)
    return exit_status(error)


def _write_summary(sweep_dir: Path, summary: SweepSummary) -> Path:
    """The summary as files in the sweep dir (also when the tracking store is gone); the markdown's path."""
    for name, text in zip(SUMMARY_FILES, (summary.markdown(), summary.to_json())):
        atomic_write_bytes(sweep_dir / name, text.encode("utf-8"))
    return sweep_dir / SUMMARY_FILES[0]


def _absolute(path: Any) -> str:
    # abspath, not resolve(): every node must compute the same string, whatever its symlinks.
    return os.path.abspath(str(path))


def _remove_previous_reports(sweep_dir: Path) -> None:
    """Reports of an earlier sweep in the same directory must not be counted as this sweep's."""
    if not sweep_dir.is_dir():
        return
    for path in [sweep_dir / JOBS_FILE, sweep_dir / ENDS_FILE, *(sweep_dir / name for name in SUMMARY_FILES),
                 *sweep_dir.rglob(OUTCOME_FILE)]:
        path.unlink(missing_ok=True)
