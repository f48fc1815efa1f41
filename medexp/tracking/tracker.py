"""The MLflow client medexp logs through: one run per cell, found again by its keys, its files
uploaded at once, its heartbeat refreshed, and runs left RUNNING by a gone process ended."""

from __future__ import annotations

import logging
import tempfile
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from medexp.tracking.reconcile import PendingEnds, ReconciledRun, why_gone
from medexp.tracking.retry import RetryingClient
from medexp.tracking.store import check_server, tracking_uri
from medexp.tracking.tags import HEARTBEAT, git_commit, process_tags, version_tags
from medexp.tracking.ui import missing_experiment_tags

log = logging.getLogger(__name__)

_PARAM_LIMIT = 6000  # MLflow's maximum param value length
_BATCH = 100  # MLflow accepts at most 100 params per log_batch call
_PAGE = 1000  # runs per search_runs page
_TIMING_DEFAULTS = {"connect_timeout_s": 10.0, "heartbeat_s": 60.0, "stale_after_s": 900.0, "retries": 3,
                    "retry_backoff_s": 0.5}


@dataclass(frozen=True)
class TrackedRun:
    run_id: str
    status: str
    metrics: dict[str, float]
    tags: dict[str, str]
    params: dict[str, str] = field(default_factory=dict)
    start_time: int = 0  # milliseconds since the epoch


class Tracker:
    def __init__(self, tracking_cfg, root: str | Path):
        from mlflow.tracking import MlflowClient

        self.root = Path(root).resolve()
        self.uri = tracking_uri(tracking_cfg, self.root)
        self.settings = {key: tracking_cfg.get(key, default) for key, default in _TIMING_DEFAULTS.items()}
        if self.uri.startswith(("http://", "https://")):
            check_server(self.uri, self.settings["connect_timeout_s"])
        # The directory of a sqlite store, which also holds the default artefact root.
        self._store_dir = Path(self.uri.removeprefix("sqlite:///")).parent if self.uri.startswith("sqlite:///") else None
        if self._store_dir is not None:
            self._store_dir.mkdir(parents=True, exist_ok=True)
        # MLflow creates (or migrates) a new sqlite store on its first query, and two processes
        # doing so at once collide ("table ... already exists"); so do creating the experiment.
        where = self.uri.removeprefix("sqlite:///") if self._store_dir is not None else self.uri
        # Ends of runs this machine could not record (the store was down or full), recorded when it answers.
        self.pending = PendingEnds(self.root / "mlruns" / "pending-ends", self.uri)
        with self._store_lock():
            self.client = RetryingClient(lambda: MlflowClient(tracking_uri=self.uri), self.settings["retries"],
                                         self.settings["retry_backoff_s"], where)
            self.experiment_id = self._experiment(tracking_cfg)

    def _store_lock(self):
        from contextlib import nullcontext

        from filelock import FileLock

        if self._store_dir is None:
            return nullcontext()
        return FileLock(str(Path(self.uri.removeprefix("sqlite:///"))) + ".lock")

    def _experiment(self, tracking_cfg) -> str:
        """The experiment's id, created if new; either way tagged so that the MLflow UI shows it as
        a runs table (medexp.tracking.ui); an experiment made by an older medexp gets the tags here."""
        existing = self.client.get_experiment_by_name(tracking_cfg.experiment)
        if existing is not None:
            for key, value in missing_experiment_tags(existing.tags).items():
                self.client.set_experiment_tag(existing.experiment_id, key, value)
            return existing.experiment_id
        location = tracking_cfg.artifact_root
        if location is None and self._store_dir is not None:
            location = (self._store_dir / "artifacts").as_uri()
        return self.client.create_experiment(
            tracking_cfg.experiment, artifact_location=location, tags=missing_experiment_tags({})
        )

    def find_finished(self, cell_key: str, config_hash: str, inputs_hash: str) -> TrackedRun | None:
        """The latest FINISHED run of this cell computed with the same settings on the same
        inputs (benchmark content, corpus, model weights), if any."""
        tags = {"medexp.cell_key": cell_key, "medexp.config_hash": config_hash, "medexp.inputs_hash": inputs_hash}
        runs = self.search(tags, "FINISHED", max_results=1)
        return runs[0] if runs else None

    def search(self, tags: dict[str, str], status: str | None = None, max_results: int | None = None) -> list[TrackedRun]:
        """Runs carrying all of ``tags`` (and in ``status``, when given), newest first: every one,
        page by page, or the first ``max_results``."""
        clauses = [f"tags.`{key}` = {_quoted(value)}" for key, value in tags.items()]
        if status is not None:
            clauses.append(f"attributes.status = {_quoted(status)}")
        runs, token = [], None
        while max_results is None or len(runs) < max_results:
            page = self.client.search_runs(
                [self.experiment_id],
                filter_string=" and ".join(clauses),
                order_by=["attributes.start_time DESC"],
                max_results=_PAGE if max_results is None else min(_PAGE, max_results - len(runs)),
                page_token=token,
            )
            runs.extend(page)
            token = page.token
            if not token:
                break
        return [_tracked(run) for run in runs]

    def start(
        self, run_name: str, tags: dict[str, str], params: dict[str, Any], parent_run_id: str | None = None
    ) -> str:
        """Open a run (nested under ``parent_run_id`` when given) with its tags and params."""
        from mlflow.entities import Param

        commit = git_commit(self.root)
        if commit:
            tags = {**tags, "mlflow.source.git.commit": commit}
        tags = {**tags, **process_tags(), **version_tags(), HEARTBEAT: f"{time.time():.3f}"}
        if parent_run_id is not None:
            tags = {**tags, "mlflow.parentRunId": parent_run_id}  # how the MLflow UI nests runs
        run = self.client.create_run(self.experiment_id, run_name=run_name, tags=tags)
        items = [Param(key, _param_value(value)) for key, value in sorted(params.items())]
        for chunk in _chunks(items, _BATCH):
            self.client.log_batch(run.info.run_id, params=chunk)
        return run.info.run_id

    def log_metrics(self, run_id: str, metrics: dict[str, float]) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        items = [Metric(key, float(value), stamp, 0) for key, value in sorted(metrics.items())]
        for chunk in _chunks(items, 1000):
            self.client.log_batch(run_id, metrics=chunk)

    def log_files(self, run_id: str, files: dict[str, Any], artifact_path: str | None = None) -> None:
        """Write ``files`` (name -> str, bytes, DataFrame or matplotlib Figure) and upload them at once."""
        with tempfile.TemporaryDirectory() as tmp:
            write_files(files, Path(tmp))
            self.log_folder(run_id, Path(tmp), artifact_path)

    def log_folder(self, run_id: str, folder: Path, artifact_path: str | None = None) -> None:
        """Upload every file under ``folder`` (as :func:`write_files` wrote them)."""
        self.client.log_artifacts(run_id, str(folder), artifact_path)

    def get_run(self, run_id: str) -> TrackedRun:
        """A tracked run by id, with its status, metrics, tags and params."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException as error:
            raise ValueError(f"no run {run_id!r} in the tracking store {self.uri}") from error
        return _tracked(run)

    def search_cells(self) -> list[TrackedRun]:
        """Every run of the experiment that is a cell (tag ``medexp.cell_key``), any status, newest
        first; sweep parents and reports (tag ``medexp.kind`` sweep or report) are left out."""
        return [
            run
            for run in self.search({})
            if "medexp.cell_key" in run.tags and run.tags.get("medexp.kind") not in ("sweep", "report")
        ]

    def read_table(self, run_id: str, artifact_path: str):
        """A parquet artefact of a run as a DataFrame (downloaded to a temporary directory)."""
        import pandas as pd
        from mlflow.exceptions import MlflowException

        with tempfile.TemporaryDirectory() as tmp:
            try:
                local = self.client.download_artifacts(run_id, artifact_path, tmp)
            except (MlflowException, OSError) as error:
                raise ValueError(f"run {run_id} has no artefact {artifact_path!r}") from error
            return pd.read_parquet(local)

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(run_id, tags=[RunTag(k, str(v)[:_PARAM_LIMIT]) for k, v in tags.items()])

    def finish(self, run_id: str, status: str = "FINISHED") -> None:
        """End the run with ``status``: FINISHED, FAILED or KILLED."""
        self._end(run_id, status, {})

    def kill(self, run_id: str, reason: str, signal_name: str | None = None) -> None:
        """End the run KILLED, with why (and the signal, when one stopped it) as tags."""
        tags = {"medexp.error": reason}
        if signal_name:
            tags["medexp.signal"] = signal_name
        self._end(run_id, "KILLED", tags)

    def _end(self, run_id: str, status: str, tags: dict[str, str]) -> None:
        """Tag the run and end it; when the store refuses (down, full), the end is written to
        :attr:`pending`, so the next command that reaches the store records it, then the error is raised."""
        try:
            try:
                if tags:
                    self.set_tags(run_id, tags)
            finally:  # a status without its tags beats a run left RUNNING
                self.client.set_terminated(run_id, status)
        except Exception as error:
            self.pending.add(run_id, status, tags, f"{type(error).__name__}: {error}")
            raise

    @contextmanager
    def heartbeat(self, run_id: str) -> Iterator[None]:
        """Refresh the run's heartbeat tag every ``tracking.heartbeat_s`` while the block runs,
        so another host can tell a long computation from a lost node."""
        import threading

        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.settings["heartbeat_s"]):
                try:
                    self.set_tags(run_id, {HEARTBEAT: f"{time.time():.3f}"})
                except Exception:  # a missed beat is harmless; the next one retries
                    log.debug("heartbeat of run %s failed", run_id, exc_info=True)

        thread = threading.Thread(target=beat, name=f"medexp-heartbeat-{run_id[:8]}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def reconcile(self) -> list[ReconciledRun]:
        """Record the ends this machine could not record earlier (:attr:`pending`); then end KILLED
        every RUNNING run whose process is gone: on this host, a pid that no longer runs (or was
        reused); on another host, a heartbeat older than ``tracking.stale_after_s`` (a lost node).
        Runs left by SIGKILL, a crash or a lost node never stay RUNNING."""
        ended = self.pending.record(self)
        for run in self.search({}, status="RUNNING"):
            reason = why_gone(run.tags, run.start_time, self.settings["stale_after_s"])
            if reason is None:
                continue
            name = run.tags.get("medexp.cell_key") or run.tags.get("mlflow.runName") or run.run_id
            log.warning("run %s (%s) was left RUNNING: %s; ending it KILLED", run.run_id, name, reason)
            self.kill(run.run_id, f"left RUNNING: {reason}")
            ended.append(ReconciledRun(run.run_id, name, reason))
        return ended

    def end_orphans(self, parent_run_id: str, reason: str, signal_name: str | None,
                    stopping: set[int] | None, unconfirmed_jobs: frozenset[str] = frozenset()) -> list[ReconciledRun]:
        """End KILLED the RUNNING runs nested under ``parent_run_id`` that ran on this host in a
        process that is gone or among ``stopping`` (processes the caller is stopping); with
        ``stopping`` None, every one of them on any host (the caller knows every job has ended).
        Either way a run of a Slurm job in ``unconfirmed_jobs`` (its end not confirmed by Slurm:
        it may still compute and log) is left RUNNING, for the heartbeat check of a later command."""
        import socket

        ended = []
        for run in self.search({"mlflow.parentRunId": parent_run_id}, status="RUNNING"):
            if run.tags.get("medexp.slurm_job_id") in unconfirmed_jobs:
                log.warning("cell run %s stays RUNNING: its Slurm job %s was not confirmed ended", run.run_id,
                            run.tags["medexp.slurm_job_id"])
                continue
            if stopping is not None:
                if run.tags.get("medexp.host") != socket.gethostname():
                    continue  # another node's cell may still run; a silent one is reconciled by heartbeat
                pid = run.tags.get("medexp.pid", "")
                stopped = pid.isdigit() and int(pid) in stopping
                if not stopped and why_gone(run.tags, run.start_time, self.settings["stale_after_s"]) is None:
                    continue
            name = run.tags.get("medexp.cell_key") or run.run_id
            log.warning("cell run %s (%s) ends KILLED: %s", run.run_id, name, reason)
            self.kill(run.run_id, reason, signal_name)
            ended.append(ReconciledRun(run.run_id, name, reason))
        return ended

    def fail(self, run_id: str, error: BaseException) -> None:
        """End the run as FAILED with the error message as a tag, then add the traceback as an
        artefact (after the end: an artefact store without space must not leave the run RUNNING)."""
        self._end(run_id, "FAILED", {"medexp.error": f"{type(error).__name__}: {error}"})
        try:
            self.log_files(run_id, {"error.txt": "".join(traceback.format_exception(error))})
        except Exception as upload:  # the tag holds the error; the traceback is extra
            log.warning("run %s: could not upload error.txt (%s: %s)", run_id, type(upload).__name__, upload)


def write_files(files: dict[str, Any], folder: Path) -> None:
    """Write ``files`` (name -> str, bytes, DataFrame or matplotlib Figure) into ``folder`` as a run's artefacts."""
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)  # a name may hold a folder
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        elif isinstance(content, bytes):
            path.write_bytes(content)
        elif hasattr(content, "to_parquet"):
            content.to_parquet(path, index=False)
        else:
            content.savefig(path, dpi=120)


def _tracked(run) -> TrackedRun:
    data = run.data
    return TrackedRun(
        run.info.run_id, run.info.status, dict(data.metrics), dict(data.tags), dict(data.params), run.info.start_time or 0
    )


def _quoted(value: str) -> str:
    """A string literal for an MLflow filter (which has no escape for a quote inside a value)."""
    for quote in ("'", '"'):
        if quote not in value:
            return f"{quote}{value}{quote}"
    raise ValueError(f"cannot search MLflow for a value holding both quote characters: {value!r}")


def _param_value(value: Any) -> str:
    text = str(value)
    return text if len(text) <= _PARAM_LIMIT else text[: _PARAM_LIMIT - 3] + "..."


def _chunks(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
