"""Every run records where it ran: host and pid always, the Slurm job (and array task) under Slurm."""

from __future__ import annotations

import os
import socket

import pytest

from medexp.config import compose
from medexp.tracking import Tracker
from medexp.tracking.tags import process_tags, slurm_job_id

_SLURM = ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT")


@pytest.fixture
def no_slurm(monkeypatch):
    for name in _SLURM:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_outside_slurm_only_host_and_pid(no_slurm):
    tags = process_tags()
    assert tags["medexp.host"] == socket.gethostname() and tags["medexp.pid"] == str(os.getpid())
    assert "medexp.slurm_job_id" not in tags and "medexp.slurm_restart_count" not in tags


def test_a_plain_slurm_job(no_slurm):
    no_slurm.setenv("SLURM_JOB_ID", "4711")
    tags = process_tags()
    assert tags["medexp.slurm_job_id"] == "4711" and tags["medexp.slurm_restart_count"] == "0"


def test_an_array_task_is_named_as_squeue_names_it(no_slurm):
    # Task 3 of array job 100 runs as job 103; squeue, sacct and scontrol call it 100_3.
    no_slurm.setenv("SLURM_JOB_ID", "103")
    no_slurm.setenv("SLURM_ARRAY_JOB_ID", "100")
    no_slurm.setenv("SLURM_ARRAY_TASK_ID", "3")
    no_slurm.setenv("SLURM_RESTART_COUNT", "2")
    tags = process_tags()
    assert tags["medexp.slurm_job_id"] == "100_3" and tags["medexp.slurm_restart_count"] == "2"


def test_slurm_job_id_of_an_environment():
    assert slurm_job_id({}) is None
    assert slurm_job_id({"SLURM_JOB_ID": ""}) is None
    assert slurm_job_id({"SLURM_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "0"}) == "7_0"


def test_a_run_carries_the_tags(no_slurm, tmp_path):
    no_slurm.setenv("SLURM_JOB_ID", "55")
    no_slurm.setenv("SLURM_ARRAY_JOB_ID", "50")
    no_slurm.setenv("SLURM_ARRAY_TASK_ID", "5")
    cfg = compose([f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"])
    tracker = Tracker(cfg.tracking, tmp_path)
    tags = tracker.get_run(tracker.start("somewhere", {}, {})).tags
    assert tags["medexp.slurm_job_id"] == "50_5" and tags["medexp.host"] == socket.gethostname()
    assert tags["medexp.pid"] == str(os.getpid())
