"""Run one cell end to end: benchmark -> control -> scores -> detector -> MLflow run."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from medexp.kernel.atomic import atomic_directory, disk_full, waiting_lock
from medexp.kernel.cell import Cell
from medexp.kernel.hashing import stable_hash
from medexp.kernel.portable import kernel_settings
from medexp.runner.evaluate import check_cell, evaluate
from medexp.runner.inputs import load_inputs
from medexp.runner.settings import cell_settings, settings_digest
from medexp.runner.signals import signal_name, signals_raise
from medexp.stats import PERMUTATION_ENGINE

log = logging.getLogger("medexp")

_KEPT_RECORD = "result.json"  # a kept result's metrics, warnings and kernel tags, beside its files/


@dataclass(frozen=True)
class CellOutcome:
    cell_key: str
    run_id: str | None  # None only when the tracking store failed before the run was opened
    # FINISHED, FAILED, CACHED (a finished run with this key already existed) or SHARED (a task of
    # shared work: the cell's cache entries filled with other jobs, nothing tracked); in a sweep's
    # outcome file also RUNNING (the cell started and has not ended), KILLED (a signal stopped it)
    # and REQUEUED (a signal stopped it and its job was requeued to run it again)
    status: str
    metrics: dict[str, float]
    error: str | None = None
    warnings: tuple[str, ...] = ()  # the detector's warnings (a degenerate threshold, ...)

    def summary(self) -> str:
        """One line per cell. The p-value to three significant digits: scoring runs on the host's
        fastest kernels, so the same cell differs between CPUs in the fifth digit of its p-value
        (measured in docs/portability.md); the tracked metrics keep every digit."""
        if self.status in ("FAILED", "KILLED"):
            return f"{self.cell_key}  {self.status}: {self.error}  run_id={self.run_id}"
        if self.status == "SHARED":
            m = {name: int(value) for name, value in self.metrics.items()}
            return (f"{self.cell_key}  shared work, task {m['task']} of {m['tasks']}: {m['n_shards_computed']} cache "
                    "shards computed here; the same cell without split.* reads them and tracks it")
        reused = "  (tracked earlier; force=true recomputes)" if self.status == "CACHED" else ""
        if "p_value" not in self.metrics:  # a descriptive result (e.g. composition_sweep): no test, all its metrics
            values = "  ".join(f"{name}={value:.4g}" for name, value in sorted(self.metrics.items()))
            return f"{self.cell_key}  descriptive  {values}  run_id={self.run_id}{reused}"
        flag = bool(self.metrics.get("flag", 0.0))
        warned = "".join(f"\n  WARNING: {warning}" for warning in self.warnings)
        return f"{self.cell_key}  p_value={self.metrics['p_value']:.3g}  flag={flag}  run_id={self.run_id}{reused}{warned}"


def run_cell(cfg: DictConfig, parent_run_id: str | None = None, tracker=None) -> CellOutcome:
    """Run (or reuse) the cell described by a composed medexp config; never raises for cell errors.

    A bad config value raises :class:`~medexp.config.ranges.ConfigRangeError` before anything is
    loaded. ``parent_run_id`` nests a computed run under a sweep's parent run; a reused (CACHED)
    run keeps the parent it was computed under. ``tracker``: a ``medexp.tracking.Tracker`` of
    ``cfg.tracking`` already open (a sweep cell has one); by default one is opened here.
    A signal (SIGINT, SIGTERM, SIGHUP) ends the run KILLED and is raised again.
    """
    from medexp.answers.coverage import TooFewAnswers
    from medexp.config.ranges import validate
    from medexp.tracking import Tracker

    validate(cfg)
    if int(cfg.split.tasks) > 1:
        return run_cell_share(cfg)
    cell = Cell.from_config(cfg)
    tracker = tracker or Tracker(cfg.tracking, cfg.paths.root)
    tracker.reconcile()  # runs left RUNNING by a killed process or a lost node
    resolved = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    # Same key but other settings (seed, permutations, ...), another medexp version or other
    # permutation draws is another computation.
    settings = cell_settings(cfg)
    fingerprint = stable_hash({"medexp": _version(), "permutation_engine": PERMUTATION_ENGINE, **settings})
    with signals_raise(), _cell_lock(cfg, cell, fingerprint):
        inputs, load_error = None, None
        try:
            check_cell(cfg)
            inputs = load_inputs(cfg, cfg.paths.cache_dir)
        except Exception as error:  # recorded as the cell's FAILED run below
            load_error = error
        if inputs is not None and not cfg.force:
            done = _reusable(tracker.find_finished(cell.key, fingerprint, inputs.inputs_hash), cell)
            if done is not None:
                return CellOutcome(cell.key, done.run_id, "CACHED", done.metrics)
        tags = {
            "medexp.model": cell.model,
            "medexp.bench": cell.bench,
            "medexp.detector": cell.detector,
            "medexp.control": cell.control,
            "medexp.cell_key": cell.key,
            "medexp.family": str(cfg.family),
            "medexp.version": _version(),
            "medexp.seed": str(cell.seed(cfg.seed)),
            "medexp.config_hash": fingerprint,
            "medexp.settings": settings_digest(settings),
            **({"medexp.bench_hash": inputs.bench_hash, "medexp.inputs_hash": inputs.inputs_hash} if inputs else {}),
            **({"medexp.judge": inputs.judge} if inputs is not None and inputs.judge else {}),
        }
        run_id = tracker.start(cell.key, tags, _flatten(resolved), parent_run_id=parent_run_id)
        try:
            with tracker.heartbeat(run_id):
                tracker.log_files(run_id, {"config.yaml": OmegaConf.to_yaml(resolved)})
                if load_error is not None:
                    raise load_error
                kept = Path(cfg.paths.cache_dir) / "unlogged" / stable_hash([cell.key, fingerprint, inputs.inputs_hash],
                                                                             length=24)
                metrics, warnings = _record(tracker, run_id, cfg, cell, inputs, kept)
            tracker.finish(run_id)
            shutil.rmtree(kept, ignore_errors=True)
        except BaseException as error:
            interrupted = signal_name(error)
            if interrupted is not None:
                _end_run(lambda: tracker.kill(run_id, f"interrupted by {interrupted}", interrupted), run_id, "KILLED")
                raise
            # A write refused for space names the path and its free space (sqlite's message names neither).
            failure = disk_full(error, cfg.paths.cache_dir) or error

            def fail() -> None:
                if isinstance(error, TooFewAnswers):  # no verdict, but the counts of what was and was not answered
                    tracker.log_metrics(run_id, error.metrics)
                    tracker.set_tags(run_id, {"medexp.warnings": str(error)})
                tracker.fail(run_id, failure)

            unrecorded = _end_run(fail, run_id, "FAILED")
            if not isinstance(error, Exception):
                raise
            log.exception("cell %s failed", cell.key)  # one cell's failure never stops a sweep
            return CellOutcome(cell.key, run_id, "FAILED", {}, f"{type(failure).__name__}: {failure}{unrecorded}")
    return CellOutcome(cell.key, run_id, "FINISHED", metrics, warnings=tuple(warnings))


def _end_run(end, run_id: str, status: str) -> str:
    """Call ``end()``, which ends the run; when the store refuses (down, full: the tracker has
    noted the end for the next command), log it and return the words the outcome adds, else ""."""
    try:
        end()
    except Exception as error:
        log.error("run %s could not be ended %s: %s: %s", run_id, status, type(error).__name__, error)
        return (f"; its run could not be ended {status} ({type(error).__name__}: {error}): the next medexp command "
                "on that store ends it")
    return ""


def run_cell_share(cfg: DictConfig) -> CellOutcome:
    """Task ``split.task`` of ``split.tasks`` jobs computing one cell together: the cell's work runs
    with its cache entries shared (:func:`medexp.kernel.shards.sharing_work`), so the jobs split the shards
    between them; nothing is tracked (status SHARED). A signal is raised again, as in a run."""
    from medexp.kernel.shards import sharing_work

    cell = Cell.from_config(cfg)
    task, tasks = int(cfg.split.task), int(cfg.split.tasks)
    with signals_raise(), sharing_work(task, tasks) as share:
        try:
            evaluate(cfg, cell.seed(cfg.seed))  # checks the cell and loads its inputs first
        except Exception as error:
            log.exception("cell %s, shared work task %d of %d, failed", cell.key, task, tasks)
            failure = disk_full(error, cfg.paths.cache_dir) or error
            return CellOutcome(cell.key, None, "FAILED", {}, f"{type(failure).__name__}: {failure}")
    return CellOutcome(cell.key, None, "SHARED",
                       {"task": float(task), "tasks": float(tasks), "n_shards_computed": float(share.computed)})


def _reusable(done, cell: Cell):
    """A tracked finished run, unless probes of it got no answer: its rerun asks them again."""
    if done is not None and done.metrics.get("n_errors", 0.0) > 0:
        log.info("cell %s: run %s left %d probe(s) without an answer; computing the cell again (only those "
                 "probes are asked)", cell.key, done.run_id, int(done.metrics["n_errors"]))
        return None
    return done


def _record(tracker, run_id: str, cfg: DictConfig, cell: Cell, inputs, kept: Path) -> tuple[dict[str, float], list[str]]:
    """Compute the cell and log its result (metrics, artefacts, kernel and warning tags) to the
    run; returns the metrics and warnings. A result computed but refused by the store is kept in
    ``kept``, and one kept there earlier is logged instead of computing again: the rerun after a
    lost server does not redo the work."""
    from medexp.tracking import write_files

    folder = kept / "files"
    if (kept / _KEPT_RECORD).is_file():
        record, files = json.loads((kept / _KEPT_RECORD).read_text(encoding="utf-8")), None
        log.info("cell %s: logging the result computed earlier that its store refused (kept in %s)", cell.key, kept)
    else:
        metrics, files, warnings = _compute(cfg, cell, inputs)
        # after the work, so the kernels torch chose for it are known
        kernel = {f"medexp.kernel.{name}": value for name, value in kernel_settings().items()}
        record = {"metrics": metrics, "warnings": list(warnings), "tags": kernel}
    try:
        tracker.set_tags(run_id, record["tags"])
        tracker.log_metrics(run_id, record["metrics"])
        if files is None:
            tracker.log_folder(run_id, folder)
        else:
            tracker.log_files(run_id, files)
    except Exception as error:
        if files is not None and disk_full(error) is None:  # the store refused a fresh result: keep it
            try:
                with atomic_directory(kept) as staging:
                    write_files(files, staging / "files")
                    (staging / _KEPT_RECORD).write_text(json.dumps(record), encoding="utf-8")
                log.warning("cell %s: its result is kept in %s; rerunning the cell logs it without computing", cell.key,
                            kept)
            except OSError as unkept:
                log.warning("cell %s: its result could not be kept either (%s)", cell.key, unkept)
        raise
    warnings = record["warnings"]
    if warnings:
        for warning in warnings:
            log.warning("cell %s: %s", cell.key, warning)
        tracker.set_tags(run_id, {"medexp.warnings": "\n".join(warnings)})
    return record["metrics"], warnings


def _compute(cfg: DictConfig, cell: Cell, inputs) -> tuple[dict[str, float], dict[str, object], list[str]]:
    """The cell's metrics, artefact files (figures, tables) and the detector's warnings."""
    metrics, result = evaluate(cfg, cell.seed(cfg.seed), inputs)
    files: dict[str, object] = {f"{name}.png": figure for name, figure in result.figures.items()}
    if result.table is not None:
        files[f"{result.table_name}.parquet"] = result.table
    files.update({f"{name}.parquet": table for name, table in result.extra_tables.items()})
    return metrics, files, result.warnings


def _cell_lock(cfg: DictConfig, cell: Cell, fingerprint: str):
    """A file lock per cell and settings: two processes starting the same cell compute it once
    (the second waits, saying so, then finds the first one's finished run)."""
    locks = Path(cfg.paths.cache_dir) / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    return waiting_lock(str(locks / f"cell-{stable_hash([cell.key, fingerprint], length=24)}.lock"),
                        f"another process computing cell {cell.key}")


def _flatten(tree, prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _version() -> str:
    from medexp import __version__

    return __version__
