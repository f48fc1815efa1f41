"""Shared by the cluster tests: free ports and a real MLflow tracking server."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory):
    """The URI of an ``mlflow server`` on a free port of 127.0.0.1 with a sqlite store."""
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
