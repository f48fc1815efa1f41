"""Each fault of a sweep on Slurm, and its truth (issue 50; marker ``cluster``, needs root).

A one-host cluster with accounting, as sites run it (scripts/local_slurm.sh up --accounting:
slurmdbd on MariaDB, so sacct reports CANCELLED, TIMEOUT, NODE_FAIL), and a tracking server
(``mlflow server`` on 127.0.0.1). Each test runs exch cells of the demo through
hydra/launcher=submitit_slurm, interrupts them mid-cell (a score shard written, not all): scancel
of one array task, a real --time limit, the node set DOWN, SIGTERM and SIGINT to the driving
command, the tracking server lost. Each checks the command's exit status (non-zero exactly when a
cell did not finish), the summary's word for each cell, that no run is RUNNING once the command
returns (for a dead server: once the next command ran), and that a rerun completes the grid with
the p-values (every metric) of an undisturbed run, reusing what finished. Each test logs into an
experiment of its own, so no test reuses another's cells. About 30 min on 2 cores.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import (BOTH, EXCH, SHARDS, assert_nothing_running, cancelled_task_is_a_killed_cell, cell_runs,
                                    environment, finish, fresh_cache, headline, interrupted, rerun_completes,
                                    server_lost_mid_sweep, signal_group_or_process, slurm_cluster, start, sweep_runs,
                                    undisturbed)

pytestmark = pytest.mark.cluster

CLEAN = "model=demo_clean,bench=demo,detector=exch,control=none"
LEAKY = "model=demo_leaky,bench=demo,detector=exch,control=none"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """SLURM_CONF of a one-host cluster with accounting (slurmdbd, MariaDB), stopped after the module."""
    yield from slurm_cluster(tmp_path_factory.mktemp("slurm-accounting"), accounting=True)


def on_slurm(uri: str, tmp_path: Path, experiment: str, *extra: str) -> list[str]:
    return ["hydra/launcher=submitit_slurm", "tracking=server", f"tracking.uri={uri}", f"tracking.experiment={experiment}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}", f"paths.root={tmp_path}", "tracking.retry_backoff_s=0.2",
            "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=4", *extra]


def queued(env: dict[str, str]) -> list[str]:
    """Job ids (``<array>_<task>``) Slurm still holds as pending or running."""
    return subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, check=True).stdout.split()


def accounted(env: dict[str, str], job: str) -> list[str]:
    """The states sacct reports for every run of ``job`` (a requeued job has several)."""
    done = subprocess.run(["sacct", "-n", "-P", "-X", "-D", "-o", "State", "-j", job], env=env, capture_output=True,
                          text=True, check=True)
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def test_a_cancelled_array_task_is_a_killed_cell_and_a_rerun_completes_the_grid(slurm, tracking_server, reference,
                                                                                tmp_path):
    expected, models = reference
    cache = fresh_cache(tmp_path / "cache", models)
    env = environment(SLURM_CONF=slurm, MEDEXP_CACHE=str(cache))
    args = ["-m", BOTH, *EXCH, *on_slurm(tracking_server, tmp_path, "scancel")]
    task = cancelled_task_is_a_killed_cell(args, env, cache, "0", tracking_server, "scancel", CLEAN)  # job 0: demo_clean
    assert accounted(env, task) == ["CANCELLED"]  # what accounting says of it
    (finished,) = [run for run in cell_runs(tracking_server, "scancel") if run.info.status == "FINISHED"]
    assert finished.data.tags["medexp.slurm_job_id"].endswith("_1")
    (parent,) = sweep_runs(tracking_server, "scancel")
    assert parent.info.status == "FAILED" and parent.data.metrics["n_killed"] == 1.0

    rerun_completes(args, env, tracking_server, "scancel", expected, reused=1, computed=1)


def test_a_cell_reaching_its_time_limit_ends_killed_and_a_rerun_resumes_it(slurm, tracking_server, reference, tmp_path):
    # --time=3 and Slurm's warning 60 s before it (--signal=USR2@60; Slurm may send it up to a
    # minute earlier still). The cell outlasts the limit: 300 other orders per shard, about 3 min of
    # scoring on 2 idle cores (the fault tests' 60 took 50 s in all, so a warning due at 60 s, or
    # sent a little late, found it finished). So the warning, or the limit itself, stops it
    # mid-scoring; max_num_timeout=0, so submitit does not requeue it.
    _, models = reference
    cell = ["model=demo_leaky", "detector=exch", "detector.shards=10", "detector.permutations=300"]
    expected = undisturbed(tmp_path / "reference", fresh_cache(tmp_path / "reference-cache", models), *cell)
    cache = fresh_cache(tmp_path / "cache", models)
    env = environment(SLURM_CONF=slurm, MEDEXP_CACHE=str(cache))
    limit = ["hydra.launcher.timeout_min=3", "hydra.launcher.signal_delay_s=60", "hydra.launcher.max_num_timeout=0"]
    args = ["-m", *cell, *on_slurm(tracking_server, tmp_path, "time_limit", *limit)]
    started = time.monotonic()
    code, out = finish(start(*args, env=env))
    print(f"\n--time=3 min: the command exited {code} after {time.monotonic() - started:.0f} s: {headline(out)}")
    assert code == 1, out[-3000:]
    assert ": 1 cells: 0 computed, 0 reused (tracked earlier), 0 failed, 1 killed" in headline(out)
    (run,) = cell_runs(tracking_server, "time_limit")
    received = run.data.tags["medexp.signal"]
    job = run.data.tags["medexp.slurm_job_id"]
    print(f"  the cell's run {run.info.status} by {received}; sacct: {job} {accounted(env, job)}")
    assert run.info.status == "KILLED" and received in ("SIGUSR2", "SIGTERM")  # the warning, or the limit itself
    assert accounted(env, job)[-1] in ("COMPLETED", "TIMEOUT")  # the job ended on the warning, or was stopped at --time
    assert sum(1 for _ in (cache / "scores").rglob("shard-*.parquet")) < SHARDS  # it was stopped mid-cell
    assert_nothing_running(tracking_server, "time_limit")

    rerun = [arg for arg in args if not arg.startswith("hydra.launcher.timeout_min=")] + ["hydra.launcher.timeout_min=30"]
    rerun_completes(rerun, env, tracking_server, "time_limit", expected, reused=0, computed=1)


def test_a_cell_whose_node_goes_down_is_requeued_and_resumes_to_the_undisturbed_result(slurm, tracking_server,
                                                                                        reference, tmp_path):
    expected, models = reference
    cache = fresh_cache(tmp_path / "cache", models)
    env = environment(SLURM_CONF=slurm, MEDEXP_CACHE=str(cache))
    args = ["-m", "model=demo_leaky", *EXCH, *on_slurm(tracking_server, tmp_path, "node_down",
                                                        "hydra.launcher.timeout_min=30")]
    node, jobs = socket.gethostname().split(".")[0], []

    def node_down(sweep) -> None:
        jobs.extend(queued(env))
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=medexp-test-node-lost"],
                       env=env, check=True)

    code, out, before, after = interrupted(args, env, cache, 1, node_down)
    (job,) = jobs
    print(f"\nnode {node} set DOWN at {before:.0f} s (job {job}); the command exited {code} {after:.0f} s later: "
          f"{headline(out)}; sacct: {accounted(env, job)}")
    # Slurm requeues a job whose node failed (JobRequeue=1, its default); the cell resumes from its shards.
    assert code == 0, out[-3000:]
    assert ": 1 cells: 1 computed, 0 reused (tracked earlier), 0 failed, 1 requeued or retried" in headline(out)
    assert accounted(env, job)[0] == "NODE_FAIL"
    killed, finished = cell_runs(tracking_server, "node_down")
    assert killed.info.status == "KILLED" and killed.data.tags["medexp.slurm_restart_count"] == "0"
    assert finished.info.status == "FINISHED" and finished.data.tags["medexp.slurm_restart_count"] == "1"
    assert finished.data.metrics == expected[LEAKY]
    assert_nothing_running(tracking_server, "node_down")

    rerun_completes(args, env, tracking_server, "node_down", {LEAKY: expected[LEAKY]}, reused=1, computed=0)


@pytest.mark.parametrize(("signum", "status", "to_group"), [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, True)])
def test_a_signal_to_the_driving_command_cancels_its_jobs_and_ends_every_run_killed(slurm, tracking_server, reference,
                                                                                    tmp_path, signum, status, to_group):
    expected, models = reference
    name = signal.Signals(signum).name
    experiment = f"driver_{name}"
    cache = fresh_cache(tmp_path / "cache", models)
    env = environment(SLURM_CONF=slurm, MEDEXP_CACHE=str(cache))
    args = ["-m", BOTH, *EXCH, *on_slurm(tracking_server, tmp_path, experiment, "hydra.launcher.timeout_min=30")]
    jobs: list[str] = []

    def stop(sweep) -> None:
        jobs.extend(queued(env))
        signal_group_or_process(sweep, signum, to_group)

    code, out, _, after = interrupted(args, env, cache, 2, stop, new_session=True)
    print(f"\n{name} to the driving command: it exited {code} {after:.1f} s later: {headline(out)}; "
          f"sacct: {[accounted(env, job) for job in jobs]}")
    assert code == status, out[-3000:]
    assert f"medexp: sweep interrupted by {name}; its runs end KILLED, rerun the same command to resume" in out
    assert "Traceback" not in out
    assert ": 2 cells: 0 computed, 0 reused (tracked earlier), 0 failed, 2 killed" in headline(out)
    assert not queued(env)  # the command's jobs went with it
    assert all(accounted(env, job) == ["CANCELLED"] for job in jobs)
    (parent,) = sweep_runs(tracking_server, experiment)
    assert parent.info.status == "KILLED" and parent.data.tags["medexp.signal"] == name
    for run in cell_runs(tracking_server, experiment):  # scancel stops each cell with SIGTERM
        assert run.info.status == "KILLED" and run.data.tags["medexp.signal"] == "SIGTERM", run.data.tags
    assert_nothing_running(tracking_server, experiment)

    rerun_completes(args, env, tracking_server, experiment, expected, reused=0, computed=2)


def test_a_tracking_server_lost_mid_sweep_fails_the_cells_and_a_rerun_logs_their_kept_results(slurm, reference,
                                                                                              tmp_path):
    expected, models = reference
    cache = fresh_cache(tmp_path / "cache", models)
    env = environment(SLURM_CONF=slurm, MEDEXP_CACHE=str(cache))
    server_lost_mid_sweep(tmp_path, lambda uri: ["-m", BOTH, *EXCH, *on_slurm(uri, tmp_path, "medexp",
                                                                              "hydra.launcher.timeout_min=30")],
                          env, cache, expected)
