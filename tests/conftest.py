"""Shared fixtures: one demo cache per test session (models are built once), fresh stores, one torch thread."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Cells of the simulated-MDE detectors (mink_tail, loss, memorization, ...) simulate their MDE on a
# cold cache; 20 draws instead of 200 keep that to a fraction of a second per cell in the suite
# (subprocesses inherit it). Tests of the simulation itself pass n_sim explicitly.
os.environ.setdefault("MEDEXP_POWER_SIMULATIONS", "20")


# Markers the default suite leaves out. Their runs predate the workers, print what they measure
# (-s) or time it (pytest-benchmark turns itself off on xdist workers), so they keep one process.
ONE_PROCESS_MARKERS = ("perf", "validation", "long", "cluster", "browser", "faults", "harness")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """One process instead of addopts' 2 xdist workers, unless the command line passes -n itself,
    for runs that gain nothing from workers or break under them: one test file (``--dist
    loadscope`` would give it whole to one worker, the other only costing its start), ``-s`` (a
    worker's output is not shown), ``--pdb``, and ``-m`` selecting one of ONE_PROCESS_MARKERS."""
    if any(re.match(r"(-n|--numprocesses)(=|\d|auto|logical|$)", arg) for arg in config.invocation_params.args):
        return
    markexpr = config.option.markexpr or ""
    marked = any(re.search(rf"(?<!not )\b{name}\b", markexpr) for name in ONE_PROCESS_MARKERS)
    files = {str(arg).split("::")[0] for arg in config.args} if config.args_source == pytest.Config.ArgsSource.ARGS else set()
    one_file = len(files) == 1 and next(iter(files)).endswith(".py")
    if marked or one_file or config.option.capture == "no" or config.getoption("usepdb", False):
        config.option.numprocesses = 0
        config.option.dist = "no"
        config.option.tx = []


def pytest_configure(config):
    """In a pytest-xdist worker (addopts in pyproject.toml: 2 workers), one thread per process: torch
    here, and OMP_NUM_THREADS=1 for the commands the tests start (``python -m medexp`` and the
    like), unless the environment sets it. With a worker per core, intra-op thread pools would only
    oversubscribe the cores, and spinning pools on busy cores are many times slower. Results do not
    depend on it: the demo models are built in a pinned one-thread process whatever the caller's
    setting, and the suite checks the README's p-value in such a subprocess. Tests that need
    another setting pass their own environment (tests/portability)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        import torch

        torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def no_signal_from_an_earlier_test(monkeypatch):
    """medexp.runner.signals remembers the signals this process turned into exceptions (a sweep's
    parent run names the last one); tests that deliver SIGTERM to their own process must not leave
    one behind for a later test, in whatever order a worker runs them."""
    signals = sys.modules.get("medexp.runner.signals")
    if signals is not None:
        monkeypatch.setattr(signals, "_received", [])


@pytest.fixture(scope="session")
def one_torch_thread():
    """One torch thread from the first test that asks for it: tiny matrices gain nothing from
    intra-op threads, and a busy machine makes spinning thread pools orders of magnitude slower."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


# The demo models the suite's cells read, in two lanes built side by side (each build is one
# single-threaded process, and a leaky model waits for its clean base): the pair, and the rest
# of the detectors' default cohort. On 2 cores the cohort costs no wall time beside the pair.
DEMO_MODEL_LANES = (("demo_clean", "demo_leaky"), ("demo_clean_b", "demo_clean_c", "demo_leaky_b"))


@pytest.fixture(scope="session")
def demo_cache(tmp_path_factory) -> Path:
    """A cache directory holding the demo benchmark, both demo models and the default cohort's, built once."""
    from concurrent.futures import ThreadPoolExecutor

    from medexp.config import compose
    from medexp.models import model_location

    cache = tmp_path_factory.mktemp("medexp-cache")
    # composed here: Hydra's compose API keeps global state, so the threads only build
    lanes = [[compose([f"model={name}"]).model for name in lane] for lane in DEMO_MODEL_LANES]
    with ThreadPoolExecutor(len(lanes)) as pool:
        for _ in pool.map(lambda lane: [model_location(model, cache) for model in lane], lanes):
            pass  # re-raises a failed build
    return cache


@pytest.fixture()
def tracking_uri(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory):
    """The URI of an ``mlflow server`` on a free port of 127.0.0.1 with a sqlite store, for a module."""
    import requests

    store = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = open(store / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}",
         "--artifacts-destination", str(store / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, cwd=store)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(f"{uri}/health", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            assert server.poll() is None and time.monotonic() < deadline, (store / "server.log").read_text()
            time.sleep(1)
        yield uri
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def sweep_and_cells(uri: str):
    """The sweep's parent run and its cell runs in experiment ``medexp`` of the store at ``uri``
    (MLflow's own client, as a user would read them)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("medexp").experiment_id])
    (parent,) = [run for run in runs if run.data.tags.get("medexp.kind") == "sweep"]
    return parent, [run for run in runs if "medexp.cell_key" in run.data.tags]


def run_medexp(*overrides: str, timeout: int = 900, extra_env: dict[str, str] | None = None,
               module: str = "medexp") -> subprocess.CompletedProcess:
    """``python -m medexp`` (or another entry ``module``) in a subprocess, exactly as a user runs it
    (with ``extra_env`` set)."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"} | (extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", module, *overrides],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# An entry module's task under Hydra's own decorator, as the entry declared it before
# medexp.config.help: argv is <module> <config dir> <config name> <arguments...>.
_HYDRAS_OWN_MAIN = """
import importlib, sys
import hydra
module, config_path, config_name, *arguments = sys.argv[1:]
task = importlib.import_module(module + ".__main__").main.__wrapped__
sys.argv[1:] = arguments
hydra.main(version_base="1.3", config_path=config_path, config_name=config_name)(task)()
"""


def run_under_hydras_own_main(module: str, config_path: str, config_name: str, *arguments: str,
                              timeout: int = 300) -> subprocess.CompletedProcess:
    """``python -m <module> <arguments>`` with the entry's task under ``@hydra.main(config_path,
    config_name)`` instead of medexp's :func:`~medexp.config.help.hydra_main`: Hydra's own answer,
    to compare with medexp's."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return subprocess.run([sys.executable, "-c", _HYDRAS_OWN_MAIN, module, config_path, config_name, *arguments],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def cell_runs(result: subprocess.CompletedProcess, uri: str) -> dict[tuple[str, str], object]:
    """The tracked run of each control=none cell a finished ``python -m medexp`` printed, by
    (model, detector)."""
    from mlflow.tracking import MlflowClient

    assert result.returncode == 0, result.stderr[-3000:]
    client = MlflowClient(uri)
    runs = {}
    for line in result.stdout.splitlines():
        match = re.match(r"model=([\w\-]+),bench=\w+,detector=(\w+),control=none .*run_id=(\w+)", line)
        if match:
            runs[(match.group(1), match.group(2))] = client.get_run(match.group(3))
    return runs


def parse_summary(stdout: str) -> dict[str, str]:
    """The fields of the one-line cell summary printed by ``python -m medexp``."""
    line = next(line for line in stdout.splitlines() if line.startswith("model="))
    return dict(re.findall(r"(\w+)=(\S+)", line.split("  ", 1)[1]))
