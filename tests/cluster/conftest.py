"""What the cluster tests share: one-host Slurm clusters (with and without accounting), the two-node
Ray cluster, an uninterrupted reference of the cells the fault tests interrupt, and helpers to
start a sweep, wait for it to be mid-cell and read the runs it left."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import pytest

from tests.conftest import REPO, free_port

SLURM = REPO / "scripts" / "local_slurm.sh"
RAY = REPO / "scripts" / "local_ray.sh"

# exch cells of the demo: each shard of 10 items scored in its order and 60 others, a minute or two
# of scoring on 2 cores, long enough to interrupt mid-cell (a shard written, not all).
EXCH = ["detector=exch", "detector.shards=10", "detector.permutations=60"]
BOTH = "model=demo_clean,demo_leaky"
SHARDS = 10


def slurm_cluster(state: Path, accounting: bool):
    """Bring up scripts/local_slurm.sh under ``state`` on free ports; yield SLURM_CONF; bring it down."""
    if os.geteuid() != 0:
        pytest.skip("the local Slurm cluster needs root (scripts/local_slurm.sh runs munged, slurmctld and slurmd)")
    if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        pytest.skip("Slurm is not installed and there is no apt-get to install it")
    env = {**os.environ, "MEDEXP_SLURM_DIR": str(state), "MEDEXP_SLURMCTLD_PORT": str(free_port()),
           "MEDEXP_SLURMD_PORT": str(free_port()), "MEDEXP_SLURMDBD_PORT": str(free_port()),
           "MEDEXP_SLURM_DB_PORT": str(free_port())}
    started = time.monotonic()
    up = subprocess.run([str(SLURM), "up", *(["--accounting"] if accounting else [])], env=env, capture_output=True,
                        text=True, timeout=900)
    if up.returncode != 0 and "could not install" in up.stderr:
        pytest.skip(f"Slurm packages could not be installed: {up.stderr.strip()}")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        print(f"\nlocal_slurm.sh up{' --accounting' if accounting else ''}: {time.monotonic() - started:.1f} s")
        yield str(state / "slurm.conf")
    finally:
        down = subprocess.run([str(SLURM), "down"], env=env, capture_output=True, text=True, timeout=300)
        assert down.returncode == 0, down.stdout + down.stderr


def environment(**extra: str) -> dict[str, str]:
    """This environment without MLFLOW_TRACKING_URI, with the checkout first on the path, and ``extra``."""
    return {**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}, "PYTHONPATH": str(REPO), **extra}


def undisturbed(tmp: Path, cache: Path, *cells: str) -> dict[str, dict[str, float]]:
    """The metrics of ``cells`` (a sweep's overrides) computed in one local process, undisturbed,
    by cell key, with score caches of their own in ``cache``."""
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "medexp", "-m", *cells, f"tracking.uri={uri}",
                           f"hydra.sweep.dir={tmp / 'sweep'}", f"paths.root={tmp}"],
                          cwd=REPO, env=environment(MEDEXP_CACHE=str(cache)), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"\nreference: {' '.join(cells)} in one local process: {time.monotonic() - started:.0f} s")
    return {run.data.tags["medexp.cell_key"]: run.data.metrics for run in cell_runs(uri)}


@pytest.fixture(scope="session")
def reference(tmp_path_factory) -> tuple[dict[str, dict[str, float]], Path]:
    """The metrics of both exch cells computed in one local process, undisturbed (by cell key), and
    the demo models it built (for the fault tests' caches)."""
    tmp = tmp_path_factory.mktemp("reference")
    return undisturbed(tmp, tmp / "cache", BOTH, *EXCH), tmp / "cache" / "demo"


def fresh_cache(folder: Path, models: Path) -> Path:
    """A cache with no score shards, sharing the demo models already built."""
    folder.mkdir(parents=True)
    (folder / "demo").symlink_to(models, target_is_directory=True)
    return folder


def start(*args: str, env: dict[str, str], new_session: bool = False) -> subprocess.Popen:
    """``python -m medexp <args>`` in the background, its output (both streams) in one pipe."""
    return subprocess.Popen([sys.executable, "-m", "medexp", *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=new_session)


def finish(proc: subprocess.Popen, timeout: float = 1800) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def shards_written(cache: Path) -> list[int]:
    """Score shards written so far, per cache entry."""
    return [len(list(entry.glob("shard-*.parquet"))) for entry in sorted((cache / "scores").glob("*"))
            if entry.is_dir()] if (cache / "scores").is_dir() else []


def wait_mid_cell(cache: Path, proc: subprocess.Popen, entries: int, timeout: float = 900) -> list[int]:
    """Wait until ``entries`` cells have each written a shard of their score cache (none all of
    them); the shards written per entry."""
    deadline = time.monotonic() + timeout
    while True:
        written = shards_written(cache)
        if len(written) >= entries and all(count >= 1 for count in written):
            assert all(count < SHARDS for count in written), f"a cell finished before it could be interrupted: {written}"
            return written
        if proc.poll() is not None:
            raise AssertionError(f"the sweep ended first: {proc.communicate()[0][-3000:]}")
        assert time.monotonic() < deadline, "no cell wrote a shard"
        time.sleep(1)


def interrupted(args: list[str], env: dict[str, str], cache: Path, entries: int, fault: Callable[[subprocess.Popen], object],
                new_session: bool = False) -> tuple[int, str, float, float]:
    """Start ``python -m medexp <args>``, wait until ``entries`` cells are mid-scoring, then call
    ``fault(process)``; the command's exit status and output, the seconds from its start to the
    fault and from the fault to its exit."""
    started = time.monotonic()
    sweep = start(*args, env=env, new_session=new_session)
    wait_mid_cell(cache, sweep, entries)
    fault(sweep)
    at = time.monotonic()
    code, out = finish(sweep)
    return code, out, at - started, time.monotonic() - at


def cancelled_task_is_a_killed_cell(args: list[str], env: dict[str, str], cache: Path, task_suffix: str, uri: str,
                                    experiment: str, cell_key: str) -> str:
    """A sweep of both exch cells on Slurm whose array task ``_<task_suffix>`` is cancelled
    mid-cell: the command exits 1 once the other cell finished, the cancelled one a killed cell
    with what Slurm said of its job, nothing left RUNNING. Returns the task's job id."""
    cancelled: list[str] = []

    def scancel(sweep: subprocess.Popen) -> None:
        queued = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, check=True)
        cancelled.extend(job for job in queued.stdout.split() if job.endswith(f"_{task_suffix}"))
        subprocess.run(["scancel", *cancelled], env=env, check=True)

    code, out, before, after = interrupted(args, env, cache, 2, scancel)
    (task,) = cancelled
    print(f"\nscancel {task} at {before:.0f} s; the command exited {code} {after:.0f} s later: {headline(out)}")
    assert code == 1, out[-3000:]
    assert ": 2 cells: 1 computed, 0 reused (tracked earlier), 0 failed, 1 killed" in headline(out)
    assert (f"  KILLED {cell_key}: interrupted by SIGTERM; launcher: job {task} ended CANCELLED without a result"
            in out), out[-3000:]
    assert_nothing_running(uri, experiment)
    killed = [run for run in cell_runs(uri, experiment) if run.info.status == "KILLED"]
    assert [run.data.tags["medexp.cell_key"] for run in killed] == [cell_key]
    assert killed[0].data.tags["medexp.signal"] == "SIGTERM"
    return task


def runs(uri: str, experiment: str, status: str | None = None) -> list:
    """The runs of ``experiment`` in the store at ``uri`` (in ``status``, when given), oldest first."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment} in {uri}"
    return client.search_runs([found.experiment_id], f"attributes.status = '{status}'" if status else "",
                              order_by=["attributes.start_time ASC"])


def cell_runs(uri: str, experiment: str = "medexp") -> list:
    """Every cell run of ``experiment``, oldest first."""
    return [run for run in runs(uri, experiment) if "medexp.cell_key" in run.data.tags]


def sweep_runs(uri: str, experiment: str) -> list:
    """Every sweep's parent run of ``experiment``, oldest first."""
    return [run for run in runs(uri, experiment) if run.data.tags.get("medexp.kind") == "sweep"]


def assert_nothing_running(uri: str, experiment: str) -> None:
    running = runs(uri, experiment, "RUNNING")
    assert not running, [run.data.tags.get("mlflow.runName") for run in running]


def finished_metrics(uri: str, experiment: str) -> dict[str, dict[str, float]]:
    """The metrics of each cell's FINISHED run, by cell key; exactly one per cell."""
    finished: dict[str, dict[str, float]] = {}
    for run in cell_runs(uri, experiment):
        if run.info.status == "FINISHED":
            key = run.data.tags["medexp.cell_key"]
            assert key not in finished, f"two FINISHED runs of {key}"
            finished[key] = run.data.metrics
    return finished


def rerun_completes(args: list[str], env: dict[str, str], uri: str, experiment: str, expected: dict[str, dict],
                    reused: int, computed: int) -> None:
    """The same command again: exit 0, the cells that finished reused, the others computed (from
    their shards or their kept results), every metric of each cell equal to ``expected`` (the
    undisturbed run's, by cell key), nothing RUNNING."""
    started = time.monotonic()
    code, out = finish(start(*args, env=env))
    print(f"  rerun: exit {code} in {time.monotonic() - started:.0f} s: {headline(out)}")
    assert code == 0, out[-3000:]
    assert f": {computed + reused} cells: {computed} computed, {reused} reused (tracked earlier), 0 failed" in headline(out)
    assert finished_metrics(uri, experiment) == expected
    assert_nothing_running(uri, experiment)


def server_lost_mid_sweep(folder: Path, args_on: Callable[[str], list[str]], env: dict[str, str], cache: Path,
                          expected: dict[str, dict]) -> None:
    """A sweep of both exch cells (``args_on(server uri)``) into a tracking server stopped once both
    cells are mid-scoring: the command exits 1 with both cells failed (their results kept on this
    machine, their ends noted); the server started again, a rerun records those ends and logs the
    kept results without computing them, to the undisturbed metrics."""
    from tests.faults.servers import Server

    server = Server(folder, environment())
    server.start()
    try:
        args = args_on(server.uri)
        code, out, _, after = interrupted(args, env, cache, 2, lambda sweep: server.stop())
        print(f"\nserver stopped mid-sweep; the command exited {code} {after:.0f} s later: {headline(out)}")
        assert code == 1, out[-3000:]
        assert ": 2 cells: 0 computed, 0 reused (tracked earlier), 2 failed" in headline(out)
        assert "could not be ended FAILED in the tracking store" in out and "the next medexp command" in out

        server.start()  # back: the next command records what the first could not
        rerun_completes(args, env, server.uri, "medexp", expected, reused=0, computed=2)
        first, second = sweep_runs(server.uri, "medexp")
        assert first.info.status == "FAILED" and "recorded late" in first.data.tags["medexp.late_end"]
        assert second.info.status == "FINISHED"
        failed = [run for run in cell_runs(server.uri) if run.info.status != "FINISHED"]
        assert len(failed) == 2 and all(run.info.status == "FAILED" and "medexp.late_end" in run.data.tags
                                        for run in failed)
    finally:
        server.stop()


def headline(out: str) -> str:
    """The summary's headline: what follows ``sweep run <id> <STATUS>...: ``."""
    lines = [line for line in out.splitlines() if line.startswith("sweep run ") and " cells: " in line]
    assert lines, out[-3000:]
    return lines[-1]


def signal_group_or_process(proc: subprocess.Popen, signum: int, group: bool) -> None:
    """Ctrl-C reaches the terminal's whole process group; SIGTERM (kill, a scheduler) the process alone."""
    if group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)


@pytest.fixture(scope="module")
def ray_cluster():
    """The environment (RAY_ADDRESS and its token) and state dir of a running two-node cluster, stopped after the module."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    if ray is None:
        pytest.skip("Ray is not installed (pip install -e '.[ray]')")
    # A short directory: Ray nests its Unix sockets under it (at most 107 bytes a path).
    state = Path(tempfile.mkdtemp(prefix="mxray-"))
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MEDEXP_", "RAY_"))}
    env.update(PATH=f"{Path(ray).parent}{os.pathsep}{env.get('PATH', '')}", MEDEXP_RAY_DIR=str(state),
               MEDEXP_RAY_PORT=str(free_port()))
    up = subprocess.run([str(RAY), "up"], env=env, capture_output=True, text=True, timeout=300)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "2 nodes up" in up.stdout
        exports = up.stdout.strip().splitlines()[-1].removeprefix("export ").split()
        yield dict(item.split("=", 1) for item in exports), state
    finally:
        pids = (state / "ray.pids").read_text().split() if (state / "ray.pids").exists() else []
        down = subprocess.run([str(RAY), "down"], env=env, capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stdout + down.stderr
        assert pids and not [pid for pid in pids if alive(int(pid))]
        shutil.rmtree(state, ignore_errors=True)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no parent reaps does not)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False

