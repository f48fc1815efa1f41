"""What every run records about the process and environment computing it: the host, pid and
process start (so that a run left RUNNING can be told from a live one), the Slurm job it ran in,
the heartbeat tag, the versions of the packages that change scores, and the git commit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HEARTBEAT = "medexp.heartbeat"


def process_tags() -> dict[str, str]:
    """Who runs a run: host, pid and the process's start time (a pid can be reused), and the
    Slurm job and the Ray node when there are."""
    import socket

    tags = {"medexp.host": socket.gethostname(), "medexp.pid": str(os.getpid()),
            "medexp.process_start": f"{process_start(os.getpid()):.3f}"}
    job = slurm_job_id(os.environ)
    if job is not None:
        tags["medexp.slurm_job_id"] = job
        # How many times Slurm requeued the job (preemption, `scontrol requeue`, a timeout resubmitted).
        tags["medexp.slurm_restart_count"] = os.environ.get("SLURM_RESTART_COUNT", "0")
    node = ray_node_id()
    if node is not None:
        tags["medexp.ray_node_id"] = node
    return tags


def ray_node_id() -> str | None:
    """The Ray node this process is a worker or driver of, or None outside Ray. Ray is only asked
    when the process already imported it (a Ray launcher's task): a plain run never loads it."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return ray.get_runtime_context().get_node_id()


def slurm_job_id(environ) -> str | None:
    """The Slurm job a process runs in, as ``squeue``/``sacct`` name it: ``<array job>_<task>`` for an
    array task (``SLURM_ARRAY_JOB_ID``, ``SLURM_ARRAY_TASK_ID``), otherwise ``SLURM_JOB_ID``; None
    outside Slurm."""
    job = environ.get("SLURM_JOB_ID")
    if not job:
        return None
    task = environ.get("SLURM_ARRAY_TASK_ID")
    if task:
        return f"{environ.get('SLURM_ARRAY_JOB_ID') or job}_{task}"
    return job


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
