"""Runs left RUNNING by a process that is gone (SIGKILL, a crash, a lost node): how to tell them
from live ones, and what ending them KILLED reports."""

from __future__ import annotations

import time
from dataclasses import dataclass

from medexp.tracking.tags import HEARTBEAT, process_start


@dataclass(frozen=True)
class ReconciledRun:
    """A run found RUNNING whose process is gone, now ended KILLED."""

    run_id: str
    name: str
    reason: str


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
        return None if alive else f"its process {pid} on {host} has ended (SIGKILL, a crash or a reboot)"
    last = float(tags.get(HEARTBEAT) or start_ms / 1000)
    silent = time.time() - last
    if silent > stale_after_s:
        return f"no heartbeat from {host or 'its host'} for {silent / 60:.0f} min (a lost node or a killed job)"
    return None
