"""Tracking servers for the fault tests: a real ``mlflow server`` that can be stopped and started
again on its port, and a proxy in front of one that loses the server in the middle of a cell's
artefact upload (no timing to hit: it acts on the n-th upload request)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from tests.conftest import free_port

class Server:
    """``mlflow server`` on 127.0.0.1 with a sqlite store, stopped and started again on the same port."""

    def __init__(self, folder: Path, env: dict[str, str] | None = None) -> None:
        self.folder, self.port = folder, free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.folder / "server.log", "a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{self.folder / 'mlflow.db'}",
             "--artifacts-destination", str(self.folder / "artifacts"), "--host", "127.0.0.1", "--port",
             str(self.port), "--workers", "1"], stdout=log, stderr=subprocess.STDOUT, cwd=self.folder, env=self.env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.uri}/health", timeout=2).ok:
                    return
            except requests.RequestException:
                time.sleep(1)
        raise AssertionError((self.folder / "server.log").read_text()[-3000:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)


ARTEFACT_UPLOAD = "/api/2.0/mlflow-artifacts/artifacts/"  # the path of a PUT that uploads one artefact file
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization",
               "proxy-authenticate", "host", "content-length"}


class LosingProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``target`` (a tracking server) that passes every
    request through until the ``lose_at``-th artefact upload: that request, and every request
    after it until :meth:`restore`, is dropped unanswered (the connection closed), as a server
    that died mid-upload looks to its clients."""

    def __init__(self, target: str, lose_at: int) -> None:
        self.target, self.lose_at = target.rstrip("/"), lose_at
        self.uploads = 0  # artefact uploads seen
        self.passed: list[str] = []  # the artefact paths the server received
        self.lost = False
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.uri = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def restore(self) -> None:
        """The server is back: requests pass through again, and no more are lost."""
        self.lost, self.lose_at = False, 0

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "PUT" and ARTEFACT_UPLOAD in self.path:
                    proxy.uploads += 1
                    if proxy.uploads == proxy.lose_at:
                        proxy.lost = True
                if proxy.lost:
                    self.close_connection = True  # no answer: the client sees the connection dropped
                    return
                headers = {key: value for key, value in self.headers.items() if key.lower() not in _HOP_BY_HOP}
                answer = requests.request(self.command, proxy.target + self.path, headers=headers, data=body,
                                          timeout=120, stream=True)
                content = answer.raw.read(decode_content=False)
                if self.command == "PUT" and ARTEFACT_UPLOAD in self.path and answer.ok:
                    proxy.passed.append(self.path.split(ARTEFACT_UPLOAD, 1)[1])
                self.send_response(answer.status_code)
                for key, value in answer.headers.items():
                    if key.lower() not in _HOP_BY_HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _forward

        return Handler
