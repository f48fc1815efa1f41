"""A sweep tells the truth (issue 43), unit by unit: tracking calls that ride out blips, a full
disk named, run ends the store refused recorded later, the sweep's exit status and parent run,
signals that end every run they interrupt, and command-line values checked before work. The
same scenarios with real servers, signals and filesystems: tests/faults/."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys

import pytest
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, TEMPORARILY_UNAVAILABLE

from medexp.kernel.atomic import DiskFull, disk_full
from medexp.config import compose
from medexp.config.ranges import ConfigRangeError, validate
from medexp.runner import signals as signals_module
from medexp.runner.cell_run import CellOutcome
from medexp.runner.signals import Interrupted, signals_raise
from medexp.runner.sweep import SweepParentRun, stopped_by, write_outcome
from medexp.tracking import Tracker
from medexp.tracking.retry import RetryingClient, is_transient
from medexp.tracking.tags import process_start, process_tags
from tests.conftest import REPO

KEY = "model=a,bench=demo,detector=exch_rank,control=none"


@pytest.fixture(autouse=True)
def forget_received_signals():
    """Signals raised here must not stay on record for later tests (a sweep ended aborted names
    the last one received)."""
    before = list(signals_module._received)
    yield
    signals_module._received[:] = before


def _tracker(tmp_path, **settings) -> Tracker:
    cfg = compose([f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                   *[f"tracking.{key}={value}" for key, value in settings.items()]])
    return Tracker(cfg.tracking, tmp_path)


class Flaky:
    """A client whose ``call`` raises the given errors in turn, then answers "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors, self.calls = list(errors), 0

    def call(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def _retrying(client: Flaky, retries: int = 3) -> RetryingClient:
    return RetryingClient(lambda: client, retries=retries, backoff_s=0.0, where="/store/mlflow.db")


# ------------------------------------------------------------------ retries and a full disk

# What MLflow's HTTP layer raised when its telemetry thread changed os.environ under a request.
TELEMETRY_RACE = MlflowException("API request to http://h:5000/api/2.0/mlflow/runs/log-batch failed with "
                                 "exception '_MLFLOW_TELEMETRY_SESSION_ID'")


def test_a_transient_error_is_retried_and_the_call_then_answers():
    client = Flaky(TELEMETRY_RACE, ConnectionResetError("reset by peer"), MlflowException("busy", TEMPORARILY_UNAVAILABLE))
    assert _retrying(client).call() == "ok"
    assert client.calls == 4


def test_a_lasting_error_is_raised_after_the_retries_then_later_calls_are_tried_once():
    client = Flaky(*[TELEMETRY_RACE] * 10)
    retrying = _retrying(client, retries=2)
    with pytest.raises(MlflowException):
        retrying.call()
    assert client.calls == 3
    with pytest.raises(MlflowException):
        retrying.call()  # the store counts as down: one try
    assert client.calls == 4


def test_an_error_of_the_request_itself_is_not_retried():
    client = Flaky(MlflowException("Run 'x' not found", RESOURCE_DOES_NOT_EXIST))
    with pytest.raises(MlflowException, match="not found"):
        _retrying(client).call()
    assert client.calls == 1
    assert not is_transient(ValueError("a bug"))


def test_a_full_store_is_not_retried_and_names_the_store_and_its_free_space():
    try:
        raise MlflowException("(sqlite3.OperationalError) database or disk is full\n[SQL: INSERT ...]",
                              TEMPORARILY_UNAVAILABLE)
    except MlflowException as error:
        full_store = error
    client = Flaky(full_store)
    with pytest.raises(DiskFull) as info:
        _retrying(client).call()
    assert client.calls == 1
    message = str(info.value)
    assert message.startswith("no space left for /store/mlflow.db: ") and "MiB free on the filesystem of /" in message
    assert "database or disk is full" in message and "INSERT" not in message  # the statement left out


def test_disk_full_names_the_destination_of_a_copy_and_ignores_other_errors(tmp_path):
    copy = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "src"), None, str(tmp_path / "dst"))
    assert str(disk_full(copy)).startswith(f"no space left for {tmp_path / 'dst'}: ")
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("while writing a shard") from inner
    except RuntimeError as wrapped:
        assert f"no space left for {tmp_path}: " in str(disk_full(wrapped, tmp_path))
    assert disk_full(OSError(errno.EACCES, "Permission denied", "/x")) is None
    assert disk_full(ValueError("bad value")) is None


def test_mlflow_telemetry_is_off_in_medexp_processes_unless_turned_on():
    code = "import os, medexp.tracking; print(os.environ['MLFLOW_DISABLE_TELEMETRY'])"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_DISABLE_TELEMETRY"}
    off = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO)
    assert off.stdout.strip() == "true", off.stderr
    on = subprocess.run([sys.executable, "-c", code], env=env | {"MLFLOW_DISABLE_TELEMETRY": "false"},
                        capture_output=True, text=True, cwd=REPO)
    assert on.stdout.strip() == "false", on.stderr


# ------------------------------------------------------------------ ends the store refused, recorded later


def test_an_end_the_store_refuses_is_noted_and_the_next_reconciliation_records_it(tmp_path, monkeypatch):
    tracker = _tracker(tmp_path)
    run_id = tracker.start(KEY, {"medexp.cell_key": KEY}, {})

    def refused(*args, **kwargs):
        raise MlflowException("API request failed with exception Connection refused")

    with monkeypatch.context() as patch:
        patch.setattr(tracker.client, "set_terminated", refused)
        with pytest.raises(MlflowException):
            tracker.kill(run_id, "interrupted by SIGTERM", "SIGTERM")
    assert tracker.get_run(run_id).status == "RUNNING"
    assert json.loads(tracker.pending.path.read_text())["status"] == "KILLED"

    (ended,) = _tracker(tmp_path).reconcile()  # the next command on the store
    assert (ended.run_id, ended.status) == (run_id, "KILLED")
    run = tracker.get_run(run_id)
    assert run.status == "KILLED" and run.tags["medexp.signal"] == "SIGTERM"
    assert "recorded late" in run.tags["medexp.late_end"]
    assert not tracker.pending.path.exists()


def test_a_noted_end_of_a_run_the_store_does_not_have_is_dropped(tmp_path):
    tracker = _tracker(tmp_path)
    tracker.pending.add("0" * 32, "FAILED", {}, "store was down")
    assert tracker.reconcile() == []
    assert not tracker.pending.path.exists()


def test_a_run_whose_status_is_set_but_not_its_tags_still_ends(tmp_path, monkeypatch):
    tracker = _tracker(tmp_path)
    run_id = tracker.start(KEY, {}, {})

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tracker.client, "log_batch", full)
    with pytest.raises(OSError):
        tracker.fail(run_id, ValueError("bad"))
    assert tracker.get_run(run_id).status == "FAILED"


def test_a_process_gone_without_ending_its_run_is_named_as_such(tmp_path):
    tracker = _tracker(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    run_id = tracker.start(KEY, {}, {})
    tracker.set_tags(run_id, {**process_tags(), "medexp.pid": dead.stdout.strip()})
    (ended,) = tracker.reconcile()
    assert "has ended without ending the run and without a record of why" in ended.reason


def test_orphaned_cells_of_a_stopped_sweep_end_killed_but_not_a_live_one_or_another_hosts(tmp_path):
    tracker = _tracker(tmp_path)
    parent = tracker.start("sweep", {"medexp.kind": "sweep"}, {})
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    here = process_tags()
    cells = {
        "gone": {**here, "medexp.pid": dead.stdout.strip()},
        "stopping": here,  # this very process, named as one being stopped
        # the process that started pytest: alive, with its own start time (a pid is checked with it)
        "live": {**here, "medexp.pid": str(os.getppid()), "medexp.process_start": f"{process_start(os.getppid()):.3f}"},
        "other_host": {**here, "medexp.host": socket.gethostname() + "-other"},
    }
    ids = {}
    for name, tags in cells.items():
        ids[name] = tracker.start(name, {"medexp.cell_key": name}, {}, parent_run_id=parent)
        tracker.set_tags(ids[name], tags)
    ended = tracker.end_orphans(parent, "interrupted by SIGTERM, while this cell ran", "SIGTERM", {os.getpid()})
    assert {run.name for run in ended} == {"gone", "stopping"}
    for name, run_id in ids.items():
        run = tracker.get_run(run_id)
        assert run.status == ("KILLED" if name in ("gone", "stopping") else "RUNNING"), name
    assert tracker.get_run(ids["gone"]).tags["medexp.signal"] == "SIGTERM"


# ------------------------------------------------------------------ the sweep's exit status and parent run


def sweep_config(tmp_path, tracking_uri: str):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from medexp.config import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        overrides = [f"hydra.sweep.dir={tmp_path / 'sweep'}", f"tracking.uri={tracking_uri}", f"paths.root={tmp_path}",
                     "tracking.connect_timeout_s=2", "tracking.retry_backoff_s=0"]
        return hydra_compose(config_name="config", overrides=overrides, return_hydra_config=True)


def test_a_sweep_whose_server_is_unreachable_exits_2_before_any_cell_naming_the_server(tmp_path, capsys):
    callback = SweepParentRun()
    with pytest.raises(SystemExit) as info:
        callback.on_multirun_start(sweep_config(tmp_path, "http://127.0.0.1:9"))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "the tracking server http://127.0.0.1:9 is unreachable" in err and "no cell was launched" in err


def test_a_sweep_with_a_failed_cell_exits_1_with_the_summary_here_and_in_a_local_file(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    callback = SweepParentRun()
    callback.on_multirun_start(sweep_config(tmp_path, uri))
    parent = callback._open.run_id
    sweep_dir = tmp_path / "sweep"
    write_outcome(sweep_dir / "0", CellOutcome(KEY, "r0", "FAILED", {}, "ValueError: bad"), 0, ["model=a"], parent)
    with pytest.raises(SystemExit) as info:
        callback.on_multirun_end(sweep_config(tmp_path, uri))
    assert info.value.code == 1
    assert f"sweep run {parent} FAILED: 1 cells: 0 computed, 0 reused (tracked earlier), 1 failed" in capsys.readouterr().out
    assert "1 failed" in (sweep_dir / "sweep_summary.md").read_text()
    assert _tracker(tmp_path).get_run(parent).status == "FAILED"


def test_a_sweep_whose_store_dies_before_its_end_still_exits_1_and_its_parent_is_ended_later(tmp_path, capsys,
                                                                                             monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    callback = SweepParentRun()
    callback.on_multirun_start(sweep_config(tmp_path, uri))
    parent = callback._open.run_id
    sweep_dir = tmp_path / "sweep"
    write_outcome(sweep_dir / "0", CellOutcome(KEY, None, "FAILED", {}, "TrackingUnavailable: gone"), 0, [], parent)

    def gone(*args, **kwargs):
        raise MlflowException("API request failed with exception Connection refused")

    for method in ("log_batch", "set_terminated", "log_artifacts"):
        monkeypatch.setattr(callback._tracker.client, method, gone)
    with pytest.raises(SystemExit) as info:
        callback.on_multirun_end(sweep_config(tmp_path, uri))
    assert info.value.code == 1
    captured = capsys.readouterr()
    assert "1 cells: 0 computed, 0 reused (tracked earlier), 1 failed" in captured.out
    assert f"the summary is in {sweep_dir / 'sweep_summary.md'}" in captured.err
    assert (sweep_dir / "sweep_summary.json").is_file()
    monkeypatch.undo()
    assert _tracker(tmp_path).get_run(parent).status == "RUNNING"
    _tracker(tmp_path).reconcile()  # the store answers again: the next command ends the parent
    assert _tracker(tmp_path).get_run(parent).status == "FAILED"


@pytest.mark.parametrize(("error", "status", "name"), [(Interrupted(signal.SIGTERM), 143, "SIGTERM"),
                                                       (KeyboardInterrupt(), 130, "SIGINT")])
def test_a_stopped_sweep_ends_its_parent_killed_and_exits_128_plus_the_signal(tmp_path, capsys, error, status, name):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    callback = SweepParentRun()
    callback.on_multirun_start(sweep_config(tmp_path, uri))
    parent = callback._open.run_id
    signals_module._received.append(name)  # what the handler records before raising
    assert stopped_by(error) == status
    assert f"medexp: sweep interrupted by {name}; its runs end KILLED" in capsys.readouterr().err
    run = _tracker(tmp_path).get_run(parent)
    assert run.status == "KILLED" and run.tags["medexp.signal"] == name


# ------------------------------------------------------------------ signals


def test_only_the_first_signal_raises_and_the_driver_acts_before_it(monkeypatch):
    seen = []
    with pytest.raises(Interrupted):
        with signals_raise(before_raising=seen.append):
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                signal.pause()  # not reached
            except Interrupted:
                os.kill(os.getpid(), signal.SIGTERM)  # a second one while the run is being ended: ignored
                seen.append("run ended")
                raise
    assert seen == [signal.SIGTERM, "run ended"]


def test_sigint_raises_keyboard_interrupt_unless_the_process_ignores_it():
    with pytest.raises(KeyboardInterrupt):
        with signals_raise():
            os.kill(os.getpid(), signal.SIGINT)
            signal.pause()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job
    try:
        with signals_raise():
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)


# ------------------------------------------------------------------ values checked before work


def test_split_tasks_0_names_split_tasks():
    with pytest.raises(ConfigRangeError, match=r"^split\.tasks=0 is out of range: allowed >= 1$"):
        validate(compose(["split.tasks=0"]))


def _command(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("value", "message"), [
    ("split.tasks=0", "split.tasks=0 is out of range: allowed >= 1"),
    ("split.tasks=-2", "split.tasks=-2 is out of range: allowed >= 1"),
    ("split.task=-1", "split.task=-1 is out of range: allowed >= 0"),
])
def test_plan_refuses_a_split_value_out_of_range_with_exit_2(value, message):
    result = _command("medexp.plan", "model=synthetic", "bench=synthetic", "control=synthetic", "detector=mink_tail", value)
    assert result.returncode == 2 and f"medexp.plan: error: {message}" in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("detector=exch_rank", "effect=1.5"), "effect=1.5 is out of range for detector=exch_rank"),
    (("detector=option_order", "effect=1.5"), "effect=1.5 is out of range for detector=option_order"),
    (("detector=exch_rank", "effect=0"), "effect=0 is out of range: allowed > 0"),
    (("detector=exch_rank", "power=1"), "power=1 is out of range: allowed (0, 1)"),
])
def test_power_refuses_a_value_outside_its_scale_with_exit_2(args, message):
    result = _command("medexp.power", "bench=synthetic", *args)
    assert result.returncode == 2 and f"medexp.power: error: {message}" in result.stderr


# ------------------------------------------------------------------ a result the store refused


def test_a_result_the_store_refused_is_kept_and_a_rerun_logs_it_without_computing(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import pandas as pd

    from medexp.detectors import DetectorResult
    from medexp.runner import cell_run

    inputs = SimpleNamespace(benchmark=None, corpus=None, bench_hash="b0", inputs_hash="i0", judge=None)
    monkeypatch.setattr(cell_run, "load_inputs", lambda cfg, cache_dir: inputs)
    computed = []

    def evaluate(cfg, seed, inputs):
        computed.append(seed)
        table = pd.DataFrame({"example_id": ["a", "b"], "score": [1.0, 2.0]})
        result = DetectorResult({"p_value": 0.125, "statistic": 1.5, "n_examples": 2.0, "flag": 0.0}, table,
                                "per_example")
        return dict(result.metrics), result

    monkeypatch.setattr(cell_run, "evaluate", evaluate)
    cfg = compose([f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", f"paths.cache_dir={tmp_path / 'cache'}",
                   f"paths.root={tmp_path}", "tracking.retry_backoff_s=0"])

    def refused(self, run_id, metrics):
        raise MlflowException("API request failed with exception Connection reset by peer")

    with monkeypatch.context() as patch:
        patch.setattr(Tracker, "log_metrics", refused)
        first = cell_run.run_cell(cfg)
    assert first.status == "FAILED" and "Connection reset" in first.error
    assert [path.name for path in (tmp_path / "cache" / "unlogged").iterdir()]  # the result, kept

    second = cell_run.run_cell(cfg)
    assert second.status == "FINISHED" and second.metrics["p_value"] == 0.125
    assert len(computed) == 1  # logged from what was kept, not computed again
    artefacts = {item.path for item in _tracker(tmp_path).client.list_artifacts(second.run_id)}
    assert artefacts == {"config.yaml", "per_example.parquet"}
    assert not list((tmp_path / "cache" / "unlogged").iterdir())
    assert _tracker(tmp_path).get_run(first.run_id).status == "FAILED"
