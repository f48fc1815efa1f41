"""What every run records about the process and environment computing it: the host, pid and
process start (so that a run left RUNNING can be told from a live one), the heartbeat tag, the
versions of the packages that change scores, and the git commit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

HEARTBEAT = "medexp.heartbeat"


def process_tags() -> dict[str, str]:
    """Who runs a run: host, pid and the process's start time (a pid can be reused)."""
    import socket

    return {"medexp.host": socket.gethostname(), "medexp.pid": str(os.getpid()),
            "medexp.process_start": f"{process_start(os.getpid()):.3f}"}


# The packages whose versions change scores and p-values (the demo models train differently under
# another torch, for one); every run records them so that a figure can be traced to its environment.
VERSIONED_PACKAGES = ("torch", "transformers", "numpy", "scipy", "medexp")


def version_tags() -> dict[str, str]:
    """``medexp.versions.<package>``: the installed version of each of VERSIONED_PACKAGES, or
    "not installed"."""
    from importlib.metadata import PackageNotFoundError, version

    tags = {}
    for package in VERSIONED_PACKAGES:
        try:
            tags[f"medexp.versions.{package}"] = version(package)
        except PackageNotFoundError:
            tags[f"medexp.versions.{package}"] = "not installed"
    return tags


def process_start(pid: int) -> float:
    """When process ``pid`` started (seconds since the epoch): with the pid, it names one process."""
    import psutil

    return psutil.Process(pid).create_time()


def git_commit(root: Path) -> str | None:
    """The commit checked out at ``root``, or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None
