"""True run states: runs left RUNNING by a dead process or a lost node are ended KILLED; SIGTERM
and SIGKILL mid-scoring, then a rerun, give p-values equal to an uninterrupted run's."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from medexp.config import compose
from medexp.tracking import Tracker
from medexp.tracking.tags import HEARTBEAT, process_tags
from tests.conftest import REPO, parse_summary


def _tracker(tmp_path, **settings) -> Tracker:
    cfg = compose([f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                   *[f"tracking.{key}={value}" for key, value in settings.items()]])
    return Tracker(cfg.tracking, tmp_path)


def test_reconcile_ends_runs_whose_process_is_gone(tmp_path):
    tracker = _tracker(tmp_path, stale_after_s=600)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = finished.stdout.strip()
    here = process_tags()
    runs = {
        "dead_here": {**here, "medexp.pid": dead_pid},
        "reused_pid": {**here, "medexp.process_start": "12.000"},  # our pid, another start time
        "alive_here": here,
        "lost_node": {"medexp.host": "node-7", "medexp.pid": "4242", HEARTBEAT: f"{time.time() - 3600:.3f}"},
        "busy_node": {"medexp.host": "node-8", "medexp.pid": "4242", HEARTBEAT: f"{time.time() - 30:.3f}"},
    }
    ids = {}
    for name, tags in runs.items():
        ids[name] = tracker.start(name, {"medexp.cell_key": name}, {})
        tracker.set_tags(ids[name], tags)
    ended = {run.name: run for run in tracker.reconcile()}
    assert set(ended) == {"dead_here", "reused_pid", "lost_node"}
    assert "has ended" in ended["dead_here"].reason and "no heartbeat from node-7" in ended["lost_node"].reason
    client = tracker.client
    for name, run_id in ids.items():
        run = client.get_run(run_id)
        assert run.info.status == ("KILLED" if name in ended else "RUNNING"), name
        if name in ended:
            assert run.data.tags["medexp.error"].startswith("left RUNNING")
    assert tracker.reconcile() == []  # nothing left to end


def test_heartbeat_refreshes_the_tag(tmp_path):
    tracker = _tracker(tmp_path, heartbeat_s=0.05)
    run_id = tracker.start("beating", {}, {})
    first = float(tracker.get_run(run_id).tags[HEARTBEAT])
    with tracker.heartbeat(run_id):
        time.sleep(0.5)
    assert float(tracker.get_run(run_id).tags[HEARTBEAT]) > first


def test_unreachable_tracking_server_fails_fast_naming_the_uri(monkeypatch):
    from medexp.tracking import TrackingUnavailable

    for name in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"):
        monkeypatch.delenv(name, raising=False)
    cfg = compose(["tracking=server", "tracking.uri=http://127.0.0.1:9", "tracking.connect_timeout_s=2"])
    with pytest.raises(TrackingUnavailable) as info:
        Tracker(cfg.tracking, REPO)
    assert "http://127.0.0.1:9 is unreachable" in str(info.value) and "tracking.uri=" in str(info.value)
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2"  # MLflow's own retries stay short


def test_unreachable_tracking_server_exits_2_with_the_message():
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    result = subprocess.run([sys.executable, "-m", "medexp", "tracking=server", "tracking.uri=http://127.0.0.1:9",
                             "tracking.connect_timeout_s=2"], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2
    assert "medexp: error: the tracking server http://127.0.0.1:9 is unreachable" in result.stderr


# ------------------------------------------------------------------ signals mid-scoring (real processes)

CELL = ["model=demo_leaky", "detector=exch_rank", "detector.n_permutations=2000"]


def _fresh_cache(demo_cache: Path, target: Path) -> Path:
    """A cache with the built demo benchmark and models but no scores."""
    shutil.copytree(demo_cache / "demo", target / "demo")
    return target


def _start(cache: Path, uri: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return subprocess.Popen([sys.executable, "-m", "medexp", *CELL, f"paths.cache_dir={cache}", f"tracking.uri={uri}"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_first_shard(cache: Path, proc: subprocess.Popen, timeout: float = 600) -> None:
    """Until the first shard of the example-score table is written and recorded."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if list((cache / "scores").glob("*/shard-000000000-*.parquet.json")):
            return
        if proc.poll() is not None:
            raise AssertionError(f"the cell ended before its first shard: {proc.communicate()[1][-3000:]}")
        time.sleep(0.02)
    raise AssertionError("no shard was written in time")


def _finished(cache: Path, uri: str) -> tuple[dict[str, str], str]:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    result = subprocess.run([sys.executable, "-m", "medexp", *CELL, f"paths.cache_dir={cache}", f"tracking.uri={uri}"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return parse_summary(result.stdout), result.stderr


def _per_example(uri: str, run_id: str) -> pd.DataFrame:
    client = MlflowClient(uri)
    return pd.read_parquet(client.download_artifacts(run_id, "per_example.parquet"))


@pytest.fixture(scope="module")
def uninterrupted(demo_cache, tmp_path_factory):
    """The cell run once without interruption: its summary and store."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    uri = f"sqlite:///{folder / 'reference.db'}"
    summary, _ = _finished(_fresh_cache(demo_cache, folder / "cache"), uri)
    return summary, uri


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_mid_scoring_then_a_rerun_equals_an_uninterrupted_run(demo_cache, uninterrupted, tmp_path, signum):
    reference, reference_uri = uninterrupted

    cache, uri = _fresh_cache(demo_cache, tmp_path / "cache"), f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = _start(cache, uri)
    _wait_for_first_shard(cache, proc)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=300)
    client = MlflowClient(uri)
    (interrupted,) = client.search_runs([client.get_experiment_by_name("medexp").experiment_id])
    (entry,) = [path.parent for path in (cache / "scores").glob("*/key.json")]
    assert not (entry / "complete.json").exists()  # the score table was not finished
    first_shard = next(entry.glob("shard-000000000-*.parquet"))
    written = first_shard.stat().st_mtime_ns
    if signum == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM
        assert "interrupted by SIGTERM" in stderr
        assert interrupted.info.status == "KILLED" and interrupted.data.tags["medexp.signal"] == "SIGTERM"
    else:
        assert interrupted.info.status == "RUNNING"  # nothing could end it; the next invocation does

    resumed, resumed_stderr = _finished(cache, uri)
    assert client.get_run(interrupted.info.run_id).info.status == "KILLED"
    assert first_shard.stat().st_mtime_ns == written  # resumed from the first shard, not recomputed
    assert resumed["p_value"] == reference["p_value"]
    metrics = client.get_run(resumed["run_id"]).data.metrics
    assert metrics == MlflowClient(reference_uri).get_run(reference["run_id"]).data.metrics
    pd.testing.assert_frame_equal(_per_example(uri, resumed["run_id"]), _per_example(reference_uri, reference["run_id"]))


# ------------------------------------------------------------------ concurrent starts (real processes)

SYNTHETIC_CELL = ["model=synthetic", "model.name=high_gain_a", "bench=synthetic", "control=synthetic", "seed=20260531",
                  "detector=mink_tail", "detector.cohort=[]", "detector.strata=[answer_type]",
                  "detector.thresholds=[50,100]", "detector.flag_threshold=100", "detector.n_permutations=500"]


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("n_processes", [2, 8])
def test_processes_started_together_on_a_fresh_store_compute_a_cell_once(tmp_path, n_processes):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    command = [sys.executable, "-m", "medexp", *SYNTHETIC_CELL, f"paths.cache_dir={tmp_path / 'cache'}",
               f"tracking.uri={uri}"]
    procs = [subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(n_processes)]
    outputs = [proc.communicate(timeout=900) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * n_processes, [err[-2000:] for _, err in outputs]
    summaries = [parse_summary(out) for out, _ in outputs]
    assert len({summary["run_id"] for summary in summaries}) == 1  # every process reports the same run
    assert sum("tracked earlier" in out for out, _ in outputs) == n_processes - 1
    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("medexp").experiment_id])
    assert run.info.status == "FINISHED"


def test_view_line_names_the_ui_and_the_runs_table_of_the_experiment(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from medexp.tracking import Tracker, ui_command
    from tests.conftest import free_port

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking = OmegaConf.create({"uri": store, "experiment": "medexp", "artifact_root": None})
    command = f"mlflow ui --backend-store-uri {store} --host 127.0.0.1"
    assert ui_command(tracking, tmp_path) == command  # no experiment yet: the UI alone
    Tracker(tracking, tmp_path)  # creates the experiment
    from mlflow.tracking import MlflowClient

    experiment_id = MlflowClient(store).get_experiment_by_name("medexp").experiment_id
    assert ui_command(tracking, tmp_path) == (
        f"{command}, then open http://127.0.0.1:5000/#/experiments/{experiment_id}/runs"
        "?workflowType=machine_learning&viewStateShareKey=medexp")
    # A server that does not answer: its address alone, at once.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    server = f"http://127.0.0.1:{free_port()}"
    offline = OmegaConf.create({"uri": server, "experiment": "medexp", "artifact_root": None})
    assert ui_command(offline, tmp_path) == f"open {server} in a browser (the tracking server's UI)"

