"""A scripted OpenAI-compatible chat-completions server for tests (no model, no network).

It binds 127.0.0.1 on a free port and serves ``POST /v1/chat/completions`` from a thread:

- the reply to a request is ``answer(prompt, body)``, a rule on the user turn's text, so a test
  knows which rows must come out correct (:func:`letter_of_option` builds such rules);
- ``fail(fragment, Fault(...), ...)`` queues faults for the requests whose prompt contains
  ``fragment``, consumed one per request before normal replies resume: an HTTP status (with an
  optional Retry-After header) or a stall longer than the client's timeout;
- every request body, its headers and arrival time are recorded (``requests``, ``headers``,
  ``times``), and the number of
  requests in flight is tracked (``max_in_flight``); ``latency`` holds each request open a while
  so that concurrency is observable;
- ``echo_temperature``: None (like OpenAI, vLLM and TGI: no temperature in the response), True
  (echo the request's), or a number (report that temperature, as a server overriding it would);
- ``fault_rule(prompt, body)``: a Fault (or None) for any request, e.g. HTTP 503 on one arm of a
  comparison, or every request (a server that is down behind a proxy);
- ``payload``: a Fault's JSON body sent as given (a 200 reply of a malformed shape);
- ``models``: the ids ``GET /v1/models`` lists (None: the route answers 404, as some servers do);
- ``api_key``: when set, a request without ``Authorization: Bearer <api_key>`` gets HTTP 401 with
  OpenAI's message, which echoes part of the key it was sent;
- ``echo_headers``: reply with the request's headers as the answer text (a server that leaks).

Usage: ``with ChatServer(answer=rule) as server: ... server.base_url ...`` or the ``chat_server``
fixture of ``tests/answers/conftest.py``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional, Union

_OPTION_LINE = re.compile(r"^([A-Z])\. (.*)$", re.MULTILINE)


def option_texts(prompt: str) -> dict[str, str]:
    """The option lines of a prompt rendered with the default layout ("B. text"), by letter."""
    return dict(_OPTION_LINE.findall(prompt))


def letter_of_option(predicate: Callable[[str], bool], otherwise: str = "I cannot tell from this image.") -> Callable:
    """A rule replying with the letter of the first option whose text satisfies ``predicate``,
    or ``otherwise`` (an unparseable reply) when none does."""

    def rule(prompt: str, body: dict) -> str:
        for letter, text in option_texts(prompt).items():
            if predicate(text):
                return letter
        return otherwise

    return rule


@dataclass(frozen=True)
class Fault:
    status: int = 500  # the HTTP status sent back
    retry_after: Optional[str] = None  # the Retry-After header, when set
    stall: float = 0.0  # seconds to wait before answering normally (longer than the client's timeout: a timeout)
    body: Optional[str] = None  # a raw body sent with ``status`` instead of an error object (status 200: malformed)
    payload: Optional[Any] = None  # a JSON body sent with ``status`` as given (a reply of a malformed shape)


def prompt_text(body: dict) -> str:
    """The text of the last user turn of a chat-completions request body."""
    content = [message for message in body.get("messages", []) if message.get("role") == "user"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


class ChatServer:
    def __init__(self, answer: Callable[[str, dict], str] = lambda prompt, body: "A", latency: float = 0.0,
                 echo_temperature: Union[None, bool, float] = None,
                 fault_rule: Optional[Callable[[str, dict], Optional[Fault]]] = None,
                 models: Optional[list[str]] = None, api_key: Optional[str] = None, echo_headers: bool = False):
        self.answer = answer
        self.latency = latency
        self.echo_temperature = echo_temperature
        self.fault_rule = fault_rule
        self.models = models
        self.api_key = api_key
        self.echo_headers = echo_headers
        self.model_list_requests = 0
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []  # time.monotonic() at each request's arrival
        self.max_in_flight = 0
        self._in_flight = 0
        self._faults: dict[str, deque[Fault]] = {}
        self._lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    def fail(self, fragment: str, *faults: Fault) -> None:
        with self._lock:
            self._faults.setdefault(fragment, deque()).extend(faults)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def requests_for(self, fragment: str) -> list[dict]:
        """The recorded request bodies whose prompt contains ``fragment``."""
        with self._lock:
            return [body for body in self.requests if fragment in prompt_text(body)]

    def times_for(self, fragment: str) -> list[float]:
        """The arrival times of the requests whose prompt contains ``fragment``."""
        with self._lock:
            return [at for at, body in zip(self.times, self.requests) if fragment in prompt_text(body)]

    def _next_fault(self, prompt: str) -> Optional[Fault]:
        with self._lock:
            for fragment, queue in self._faults.items():
                if fragment in prompt and queue:
                    return queue.popleft()
        return None

    def _enter(self, body: dict, headers: dict) -> None:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.times.append(time.monotonic())
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes; no 40 ms delayed-ACK stall

            def log_message(self, *args) -> None:  # quiet test output
                pass

            def _send(self, status: int, payload: Union[dict, str], headers: Optional[dict] = None) -> None:
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _refused_key(self) -> bool:
                sent = self.headers.get("Authorization", "")
                if server.api_key is None or sent == f"Bearer {server.api_key}":
                    return False
                shown = sent.removeprefix("Bearer ")
                self._send(401, {"error": {"message": f"Incorrect API key provided: {shown[:3]}***{shown[-4:]}. You "
                                                      "can find your API key at https://example.invalid/api-keys.",
                                           "type": "invalid_request_error", "code": "invalid_api_key"}})
                return True

            def do_GET(self) -> None:
                with server._lock:
                    server.model_list_requests += 1
                if self.path != "/v1/models" or server.models is None:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                if not self._refused_key():
                    self._send(200, {"object": "list", "data": [{"id": name, "object": "model"}
                                                                for name in server.models]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                server._enter(body, dict(self.headers))
                try:
                    time.sleep(server.latency)
                    if self._refused_key():
                        return
                    prompt = prompt_text(body)
                    fault = server._next_fault(prompt)
                    if fault is None and server.fault_rule is not None:
                        fault = server.fault_rule(prompt, body)
                    if fault is not None and fault.stall:
                        time.sleep(fault.stall)
                    elif fault is not None:
                        extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
                        message = fault.payload if fault.payload is not None else fault.body if fault.body is not None \
                            else {"error": {"message": f"scripted failure {fault.status}"}}
                        self._send(fault.status, message, extra)
                        return
                    text = json.dumps(dict(self.headers)) if server.echo_headers else server.answer(prompt, body)
                    payload = {
                        "id": f"chatcmpl-{len(server.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model"),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                    if server.echo_temperature is True:
                        payload["temperature"] = body.get("temperature")
                    elif server.echo_temperature is not None:
                        payload["temperature"] = server.echo_temperature
                    self._send(200, payload)
                finally:
                    server._leave()

        return Handler

    def start(self) -> "ChatServer":
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="chat-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)

    def __enter__(self) -> "ChatServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
