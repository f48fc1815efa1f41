"""The fault suite of issue 43 (``-m faults``, left out of the default run): small real sweeps
of synthetic cells (no model to build) into a real local ``mlflow server`` on 127.0.0.1 or a
sqlite store, with the server killed mid-sweep, real signals to the sweep's process, and stores,
caches and artefact roots on a full tmpfs. Each asserts the exit status, the run states after
the command (none RUNNING), the summary's counts, and that a rerun completes with one FINISHED
run per cell and the same results as an undisturbed run.

    python -m pytest -m faults tests/faults -p no:cacheprovider
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO, free_port
from tests.faults.servers import LosingProxy, Server

pytestmark = pytest.mark.faults

# Four mink_tail cells of the calibration model: no model to train, about 10 s each on 2 cores.
FAST_CELLS = ["model=synthetic", "bench=synthetic", "control=synthetic", "detector=mink_tail", "detector.cohort=[]",
              "model.name=low_gain_a,low_gain_b,high_gain_a,high_gain_b"]
# Two cells that compute for about 15 s each, long enough to be interrupted while they run.
SLOW_CELLS = ["model=synthetic", "bench=synthetic", "control=synthetic", "detector=composition_sweep",
              "model.name=probe", "detector.draws=8000", "seed=1,2"]
JOBLIB = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
ENV = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}


def medexp(*args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "medexp", *args], cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def finish(proc: subprocess.Popen, timeout: float = 900) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def sweep(tmp_path: Path, uri: str, cells: list[str], name: str, *extra: str) -> list[str]:
    return ["-m", *cells, *JOBLIB, f"tracking.uri={uri}", f"paths.cache_dir={tmp_path / 'cache'}",
            f"hydra.sweep.dir={tmp_path / name}", "tracking.retry_backoff_s=0.2", *extra]


def runs(uri: str) -> list:
    client = MlflowClient(uri)
    return client.search_runs([client.get_experiment_by_name("medexp").experiment_id])


def cells(uri: str) -> list:
    return [run for run in runs(uri) if "medexp.cell_key" in run.data.tags]


def results(uri: str) -> dict[tuple[str, str], dict[str, float]]:
    """The metrics of every FINISHED cell run, by (cell key, seed); exactly one run per cell."""
    finished = {}
    for run in cells(uri):
        if run.info.status == "FINISHED":
            key = (run.data.tags["medexp.cell_key"], run.data.tags["medexp.seed"])
            assert key not in finished, f"two FINISHED runs of {key}"
            finished[key] = {k: v for k, v in run.data.metrics.items() if not k.startswith("mde")}
    return finished


def assert_nothing_running(uri: str) -> None:
    running = [run.data.tags.get("mlflow.runName") for run in runs(uri) if run.info.status == "RUNNING"]
    assert running == [], f"left RUNNING: {running}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, dict]:
    """The results of both grids, undisturbed, on a sqlite store of their own."""
    tmp = tmp_path_factory.mktemp("reference")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    for cells_, name in ((FAST_CELLS, "fast"), (SLOW_CELLS, "slow")):
        code, out, err = finish(medexp(*sweep(tmp, uri, cells_, name)))
        assert code == 0, err[-3000:]
    return results(uri)


@pytest.fixture()
def server(tmp_path):
    running = Server(tmp_path, ENV)
    running.start()
    yield running
    running.stop()


def wait_for(condition, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the sweep ended first: {proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


# ------------------------------------------------------------------ the tracking server


def test_a_sweep_whose_server_dies_after_the_first_cell_exits_1_and_a_rerun_completes(tmp_path, server, reference):
    proc = medexp(*sweep(tmp_path, server.uri, FAST_CELLS, "sweep"))
    wait_for(lambda: any((tmp_path / "sweep").rglob("medexp_cell.json")), proc)
    server.stop()
    code, out, err = finish(proc)
    assert code == 1, err[-3000:]
    headline = next(line for line in out.splitlines() if line.startswith("sweep run ") and " cells: " in line)
    assert headline.split(": ", 1)[1].startswith("4 cells: ")
    summary = json.loads((tmp_path / "sweep" / "sweep_summary.json").read_text())
    assert summary["metrics"]["n_cells"] == 4 and summary["metrics"]["n_failed"] + summary["metrics"]["n_lost"] >= 1
    assert "could not be ended" in err and "the next medexp command on that store ends the run" in err

    server.start()
    code, out, err = finish(medexp(*sweep(tmp_path, server.uri, FAST_CELLS, "sweep")))
    assert code == 0, err[-3000:]
    assert_nothing_running(server.uri)
    parents = sorted((run for run in runs(server.uri) if run.data.tags.get("medexp.kind") == "sweep"),
                     key=lambda run: run.info.start_time)
    assert [run.info.status for run in parents] == ["FAILED", "FINISHED"]
    assert "recorded late" in parents[0].data.tags["medexp.late_end"]
    assert results(server.uri) == {key: value for key, value in reference.items() if "mink_tail" in key[0]}


def test_a_server_lost_while_a_cell_uploads_its_artefacts_never_leaves_it_finished_and_a_rerun_completes(
        tmp_path, server, reference):
    # The server answers through a proxy that drops everything from the cell's second result
    # artefact on (upload 1 is config.yaml at the start, 2 and 3 the figure and the table).
    proxy = LosingProxy(server.uri, lose_at=3)
    proxy.start()
    try:
        args = [*ONE_CELL, f"tracking.uri={proxy.uri}", f"paths.cache_dir={tmp_path / 'cache'}", f"paths.root={tmp_path}",
                "tracking.retry_backoff_s=0.2"]
        code, out, err = finish(medexp(*args))
        assert code == 1, err[-3000:]
        assert proxy.lost and len(proxy.passed) == 2  # config.yaml and one result artefact reached the server
        (run,) = cells(server.uri)  # read from the server itself
        assert run.info.status == "RUNNING"  # its end could not reach the server: noted for the next command
        assert len(artefacts(server.uri, run.info.run_id)) == 2
        assert "the next medexp command on that store ends it" in out + err

        proxy.restore()  # the server is back
        code, out, err = finish(medexp(*args))
        assert code == 0, err[-3000:]
        assert "logging the result computed earlier that its store refused" in out + err  # not computed again
    finally:
        proxy.stop()
    assert_nothing_running(server.uri)
    first, second = sorted(cells(server.uri), key=lambda run: run.info.start_time)
    assert first.info.status == "FAILED" and "recorded late" in first.data.tags["medexp.late_end"]
    assert second.info.status == "FINISHED"
    assert artefacts(server.uri, second.info.run_id) == {"config.yaml", "delta_tail.png", "per_stratum.parquet"}
    assert results(server.uri) == {key: value for key, value in reference.items() if "high_gain_a" in key[0]}


def artefacts(uri: str, run_id: str) -> set[str]:
    return {item.path for item in MlflowClient(uri).list_artifacts(run_id)}


def test_a_sweep_whose_server_is_unreachable_exits_2_before_launching_any_cell(tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"
    code, out, err = finish(medexp(*sweep(tmp_path, uri, FAST_CELLS, "sweep"), "tracking.connect_timeout_s=2"))
    assert code == 2
    assert f"medexp: error: the tracking server {uri} is unreachable" in err and "no cell was launched" in err
    assert not list(tmp_path.rglob("medexp_cell.json"))


# ------------------------------------------------------------------ signals


@pytest.mark.parametrize(("signum", "status", "to_group"), [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, True)])
def test_a_signal_to_a_joblib_sweep_ends_every_run_killed_and_a_rerun_completes(tmp_path, reference, signum, status,
                                                                                 to_group):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # Ctrl-C reaches the terminal's whole process group; SIGTERM (Slurm, kill) the driver alone.
    proc = medexp(*sweep(tmp_path, uri, SLOW_CELLS, "sweep"), start_new_session=True)

    def both_cells_run() -> bool:
        # Read-only sqlite: an MLflow client here would create the store's tables beside medexp's own.
        try:
            with sqlite3.connect(f"file:{tmp_path / 'mlflow.db'}?mode=ro", uri=True) as store:
                (running,) = store.execute("select count(*) from runs where status = 'RUNNING' and "
                                           "name like 'model=%'").fetchone()
        except sqlite3.Error:  # not created yet
            return False
        return running == 2

    wait_for(both_cells_run, proc)
    if to_group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    code, out, err = finish(proc)
    name = signal.Signals(signum).name
    assert code == status, err[-3000:]
    assert f"medexp: sweep interrupted by {name}; its runs end KILLED, rerun the same command to resume" in err
    assert "Traceback" not in err
    assert_nothing_running(uri)
    for run in runs(uri):
        assert run.info.status == "KILLED" and run.data.tags["medexp.signal"] == name, run.data.tags

    code, out, err = finish(medexp(*sweep(tmp_path, uri, SLOW_CELLS, "sweep")))
    assert code == 0, err[-3000:]
    assert_nothing_running(uri)
    assert results(uri) == {key: value for key, value in reference.items() if "composition_sweep" in key[0]}


# ------------------------------------------------------------------ a full disk


@pytest.fixture()
def full_disk(tmp_path):
    """A 4 MiB tmpfs, filled by ``fill()`` and emptied by ``empty()``; skipped where mounting is not permitted."""
    mount = tmp_path / "full"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip() or made.returncode}): needs root")

    class Disk:
        path = mount

        @staticmethod
        def fill() -> None:
            with open(mount / "filler", "wb") as filler:
                try:
                    while True:
                        filler.write(b"\0" * 65536)
                except OSError:
                    pass

        @staticmethod
        def empty() -> None:
            (mount / "filler").unlink()

    yield Disk
    subprocess.run(["umount", "-l", str(mount)], check=False)


ONE_CELL = ["model=synthetic", "bench=synthetic", "control=synthetic", "detector=mink_tail", "detector.cohort=[]",
            "model.name=high_gain_a"]


@pytest.mark.parametrize("where", ["cache", "artefacts"])
def test_a_cache_or_artefact_store_without_space_fails_the_cell_naming_the_path(tmp_path, full_disk, where):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cache = full_disk.path / "cache" if where == "cache" else tmp_path / "cache"
    args = [*ONE_CELL, f"tracking.uri={uri}", f"paths.cache_dir={cache}"]
    if where == "artefacts":
        args.append(f"tracking.artifact_root={(full_disk.path / 'artefacts').as_uri()}")
    full_disk.fill()
    code, out, err = finish(medexp(*args))
    assert code == 1
    (run,) = runs(uri)
    assert run.info.status == "FAILED"
    assert run.data.tags["medexp.error"].startswith(f"DiskFull: no space left for {full_disk.path}")
    assert "MiB free on the filesystem of" in run.data.tags["medexp.error"]

    full_disk.empty()
    code, out, err = finish(medexp(*args))
    assert code == 0, err[-3000:]
    assert_nothing_running(uri)
    assert [run.info.status for run in cells(uri)].count("FINISHED") == 1


def test_a_tracking_store_without_space_is_one_line_naming_it(tmp_path, full_disk):
    full_disk.fill()
    code, out, err = finish(medexp(*ONE_CELL, f"tracking.uri=sqlite:///{full_disk.path / 'mlflow.db'}",
                                   f"paths.cache_dir={tmp_path / 'cache'}"))
    assert code == 1
    assert f"medexp: error: no space left for {full_disk.path / 'mlflow.db'}: " in err and "Traceback" not in err


# ------------------------------------------------------------------ two sweeps at once on a cold cache


def test_two_sweeps_started_together_on_a_cold_cache_compute_each_cell_once(tmp_path, reference):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    procs = [medexp(*sweep(tmp_path, uri, FAST_CELLS, f"sweep{i}")) for i in range(2)]
    outcomes = [finish(proc) for proc in procs]
    assert [code for code, _, _ in outcomes] == [0, 0], [err[-3000:] for _, _, err in outcomes]
    assert_nothing_running(uri)
    assert results(uri) == {key: value for key, value in reference.items() if "mink_tail" in key[0]}
    reused = [int(json.loads((tmp_path / f"sweep{i}" / "sweep_summary.json").read_text())["metrics"]["n_reused"])
              for i in range(2)]
    assert sum(reused) == 4  # each cell computed by one sweep, reused by the other
