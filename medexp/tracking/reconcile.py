"""Runs left RUNNING by a process that is gone (SIGKILL, a crash, a lost node): how to tell them
from live ones, and what ending them KILLED reports; and the ends a live process could not record
(the store was down or full), kept on this machine until the store answers again."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medexp.kernel.atomic import atomic_write_bytes, disk_full
from medexp.tracking.retry import is_transient
from medexp.tracking.tags import HEARTBEAT, process_start

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconciledRun:
    """A run found RUNNING whose process is gone, now ended (KILLED, or the status its process
    could not record)."""

    run_id: str
    name: str
    reason: str
    status: str = "KILLED"


def why_gone(tags: dict[str, str], start_ms: int, stale_after_s: float) -> str | None:
    """Why a RUNNING run has no live process behind it, or None when it may still be running."""
    import socket

    import psutil

    host, pid, started = tags.get("medexp.host"), tags.get("medexp.pid"), tags.get("medexp.process_start")
    if host == socket.gethostname() and pid and started:
        try:
            alive = abs(process_start(int(pid)) - float(started)) < 1.0
        except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
            alive = False
        # A process that ends a run it opened, on every way out it can see (errors, signals), and
        # failing that writes the end down (PendingEnds), leaves nothing here; so it was stopped
        # by what no process can see coming.
        return None if alive else (f"its process {pid} on {host} has ended without ending the run and without "
                                   "a record of why (SIGKILL, an out-of-memory kill, a crash or a reboot)")
    last = float(tags.get(HEARTBEAT) or start_ms / 1000)
    silent = time.time() - last
    if silent > stale_after_s:
        return f"no heartbeat from {host or 'its host'} for {silent / 60:.0f} min (a lost node or a killed job)"
    return None


class PendingEnds:
    """Ends of runs (status and tags) that a process could not record because the store refused
    them: one JSON line each, in a file per store under ``folder``; :meth:`record` writes them
    once the store answers (the next medexp command on that store calls it)."""

    def __init__(self, folder: Path, uri: str) -> None:
        self.path = Path(folder) / f"{hashlib.sha1(uri.encode('utf-8')).hexdigest()[:16]}.jsonl"
        self.uri = uri

    def _lock(self):
        from filelock import FileLock

        return FileLock(str(self.path) + ".lock")

    def add(self, run_id: str, status: str, tags: dict[str, str], why: str) -> None:
        entry = {"run_id": run_id, "status": status, "tags": tags, "why": why, "uri": self.uri, "at": time.time()}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock(), self.path.open("a", encoding="utf-8") as file:
                file.write(json.dumps(entry) + "\n")
        except OSError as error:  # the same full disk: the reconciler's pid check still ends the run
            log.warning("could not note the end of run %s in %s: %s", run_id, self.path, error)
            return
        log.warning("run %s could not be ended %s in %s (%s); noted in %s, the next medexp command on that "
                    "store ends it", run_id, status, self.uri, why, self.path)

    def record(self, tracker: Any) -> list[ReconciledRun]:
        """End every noted run that is still RUNNING with its noted status and tags; keep the
        entries the store still refuses."""
        if not self.path.is_file():
            return []
        ended, kept = [], []
        with self._lock():
            entries = [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]
            for entry in entries:
                try:
                    ended.extend(self._record_one(tracker, entry))
                except Exception as error:
                    if is_transient(error) or disk_full(error) is not None:  # still down or full: kept
                        log.warning("run %s: its noted end is not recorded yet (%s)", entry["run_id"], error)
                        kept.append(entry)
                    else:  # the store answers but has no such run (a store made anew): nothing to end
                        log.warning("run %s: its noted end is dropped (%s: %s)", entry["run_id"],
                                    type(error).__name__, error)
            if kept:
                atomic_write_bytes(self.path, "".join(json.dumps(entry) + "\n" for entry in kept).encode("utf-8"))
            else:
                self.path.unlink()
        return ended

    @staticmethod
    def _record_one(tracker: Any, entry: dict[str, Any]) -> list[ReconciledRun]:
        from mlflow.entities import RunTag

        run = tracker.client.get_run(entry["run_id"])
        if run.info.status != "RUNNING":
            return []
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry["at"]))
        late = f"ended {entry['status']} at {when} by its process; recorded late, the store refused then ({entry['why']})"
        tags = {**entry["tags"], "medexp.late_end": late}
        tracker.client.log_batch(entry["run_id"], tags=[RunTag(key, str(value)) for key, value in tags.items()])
        tracker.client.set_terminated(entry["run_id"], entry["status"])
        name = run.data.tags.get("medexp.cell_key") or run.data.tags.get("mlflow.runName") or entry["run_id"]
        log.warning("run %s (%s): %s", entry["run_id"], name, late)
        return [ReconciledRun(entry["run_id"], name, late, entry["status"])]
