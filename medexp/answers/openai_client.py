"""Black-box answering through an OpenAI-compatible chat-completions API (vLLM, TGI, hosted APIs).

Every request carries the cell's decoding settings as configured (``temperature``, 0 unless
sampling is explicitly allowed; ``max_tokens``; ``seed`` when set); nothing falls back to a server
default. Where a server echoes the temperature it used, the echo is checked against the request
(the chat-completions responses of OpenAI, vLLM and TGI carry no such field, so for them the
request is the record).

Before the first probe a pre-flight request (``GET <base_url>/models``) checks that the endpoint
answers, that it accepts the key and that it serves the model id; a server without that route is
asked anyway. HTTP 401 or 403, there or on any probe, ends the answering at once
(:class:`EndpointUnusable`, naming the key's variable, never the key). Requests run on a bounded
set of worker threads; connection errors, timeouts, HTTP 429 and 5xx are retried with
exponential back-off and jitter, a ``Retry-After`` header honoured up to ``retry_after_max``;
other 4xx are not retried. Every reply shape the OpenAI and vLLM schemas allow is read: a text
(string content, text parts of a list), an empty reply (null content), a refusal (the
``refusal`` field or part, ``finish_reason: content_filter``) kept as a ``refused`` error row
with its text; any other shape is a ``malformed`` error row. A probe whose request still fails
becomes an ``error`` row with its cause (:class:`~medexp.answers.table.ErrorCause`) and message,
never a missing row and never an answer. The key is redacted from everything kept.

Each probe is answered on its own, so any slice of a probe set gets the rows it would get inside
the whole set, whatever order replies arrive in. When the caller stops (a signal raised in the
main thread, a fatal error), the workers start no new request and leave every back-off at
once; they are daemon threads, so a request still in flight never holds the process up.
"""

from __future__ import annotations

import email.utils
import logging
import math
import os
import queue
import random
import re
import threading
import time
from collections.abc import Sequence
from typing import Any, Optional

from medexp.answers.prompt import chat_request
from medexp.answers.table import ErrorCause, Status, error_row, response_row, response_table
from medexp.config.schemas.answers import AnswerMode, check_answer_config
from medexp.config.secrets import env_name_problem

log = logging.getLogger("medexp")

_EXCERPT = 300  # characters of a server's error message kept in a row's error message
_NO_MODEL_LIST = (404, 405, 501)  # a server without GET /models: the pre-flight cannot check the model id
_AUTH = (401, 403)


class AnswerError(RuntimeError):
    """A request that got no usable reply (after its retries, where retrying made sense).
    ``text``: what the reply held, when it held something (a refusal, a reply of the wrong shape)."""

    def __init__(self, message: str, cause: ErrorCause, text: str = ""):
        super().__init__(message)
        self.cause = cause
        self.text = text


class EndpointUnusable(RuntimeError):
    """No probe can be answered: the key is refused (401/403), the endpoint does not answer the
    pre-flight request, or it does not serve the model. Ends the cell; nothing is cached."""

    def __init__(self, message: str, cause: ErrorCause):
        super().__init__(message)
        self.cause = cause


class _Stopped(Exception):
    """The caller stopped the answering (signal, fatal error): a worker abandons its probe."""


def _retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), or None.
    An infinite or huge value stays as it is (the caller caps it); a negative one is 0."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is not None:
        return None if math.isnan(seconds) else max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _content_text(content: Any) -> tuple[str, Optional[str]]:
    """``(text, refusal)`` of a message's content: a string, or a list of content parts (text parts
    joined; a part with a null text holds none; a ``refusal`` part is the refusal). None is ""."""
    if content is None:
        return "", None
    if isinstance(content, str):
        return content, None
    if not isinstance(content, list):
        raise AnswerError(f"malformed reply: message content is a {type(content).__name__}", ErrorCause.malformed)
    texts, refusal = [], None
    for part in content:
        if not isinstance(part, dict):
            raise AnswerError(f"malformed reply: a content part is a {type(part).__name__}", ErrorCause.malformed)
        if part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            refusal = part["refusal"]
        elif isinstance(part.get("text"), str) and part.get("type", "text") in ("text", "output_text"):
            texts.append(part["text"])
    return "".join(texts), refusal


def reply_text(payload: Any) -> str:
    """The reply text of a chat-completions response body; :class:`AnswerError` (``refused`` or
    ``malformed``, with whatever text it held) when it holds no answer."""
    if not isinstance(payload, dict):
        raise AnswerError(f"malformed reply: the body is a JSON {type(payload).__name__}, not an object",
                          ErrorCause.malformed)
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AnswerError("malformed reply: no choices[0] object", ErrorCause.malformed)
    choice = choices[0]
    filtered = choice.get("finish_reason") == "content_filter"
    message = choice.get("message")
    if message is None and isinstance(choice.get("text"), str):  # a completions-style choice
        text, refusal = choice["text"], None
    elif isinstance(message, str):
        raise AnswerError("malformed reply: choices[0].message is a string, not an object", ErrorCause.malformed,
                          message)
    elif message is None:
        if filtered:
            raise AnswerError("refused: finish_reason content_filter, no message", ErrorCause.refused)
        raise AnswerError("malformed reply: choices[0].message is null", ErrorCause.malformed)
    elif not isinstance(message, dict):
        raise AnswerError(f"malformed reply: choices[0].message is a {type(message).__name__}", ErrorCause.malformed)
    else:
        text, refusal = _content_text(message.get("content"))
        if isinstance(message.get("refusal"), str) and message["refusal"].strip():
            refusal = message["refusal"]
    if refusal is not None:
        raise AnswerError("refused: the reply is a refusal", ErrorCause.refused, refusal)
    if filtered:
        raise AnswerError("refused: finish_reason content_filter", ErrorCause.refused, text)
    return text


def _cause_of_status(status: int) -> ErrorCause:
    if status == 429:
        return ErrorCause.rate_limited
    return ErrorCause.http_5xx if status >= 500 else ErrorCause.http_4xx


def _server_message(response) -> str:
    """The server's own error message (``error.message`` of a JSON body), or a short note."""
    try:
        payload = response.json()
    except ValueError:
        return f"a {response.headers.get('Content-Type', 'non-JSON')} body of {len(response.content)} bytes"
    error = payload.get("error") if isinstance(payload, dict) else None
    message = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    if not isinstance(message, str):
        message = payload.get("message") if isinstance(payload, dict) else None
    return str(message)[:_EXCERPT] if message else "a JSON body without an error message"


class ChatClient:
    """A chat-completions endpoint answering probes. Build it with :meth:`from_model_config`."""

    def __init__(self, base_url: str, model: str, api_key_env: Optional[str] = None, max_concurrency: int = 4,
                 max_retries: int = 5, request_timeout: float = 60.0, retry_backoff: float = 1.0,
                 retry_backoff_max: float = 60.0, retry_after_max: float = 300.0, preflight: bool = True):
        if not re.match(r"https?://", base_url or ""):
            raise ValueError(f"model.base_url must be an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1), "
                             f"got {base_url!r}")
        for key, value, least in (("max_concurrency", max_concurrency, 1), ("max_retries", max_retries, 0)):
            if value < least:
                raise ValueError(f"model.{key} must be at least {least}, got {value}")
        for key, value in (("request_timeout", request_timeout), ("retry_after_max", retry_after_max)):
            if not value > 0:
                raise ValueError(f"model.{key} must be > 0, got {value}")
        for key, value in (("retry_backoff", retry_backoff), ("retry_backoff_max", retry_backoff_max)):
            if not value >= 0:
                raise ValueError(f"model.{key} must be >= 0, got {value}")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.model = model
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max
        self.retry_after_max = retry_after_max
        self.preflight = preflight
        self.api_key_env = api_key_env
        self._headers = {"Content-Type": "application/json"}
        self._secret: Optional[str] = None
        if api_key_env is not None:
            problem = env_name_problem(api_key_env, "model.api_key_env")
            if problem:
                raise ValueError(problem)
            key = os.environ.get(api_key_env)
            if not key:
                raise ValueError(f"model.api_key_env names the environment variable {api_key_env}, which is not set "
                                 f"(export {api_key_env}=... before running)")
            self._secret = key
            self._headers["Authorization"] = f"Bearer {key}"
        self._local = threading.local()
        self._idle_sessions: queue.SimpleQueue = queue.SimpleQueue()  # kept across calls: connections are reused
        self._served: set[str] = set()
        self._served_lock = threading.Lock()
        self._checked = False

    @classmethod
    def from_model_config(cls, model_cfg) -> "ChatClient":
        from medexp.config.schemas import ModelFamily

        if ModelFamily(model_cfg.family) is not ModelFamily.openai_compatible:
            raise ValueError(f"model={model_cfg.name} has family {ModelFamily(model_cfg.family).value}; "
                             "the chat client serves family openai_compatible")
        return cls(base_url=model_cfg.base_url, model=model_cfg.pretrained or model_cfg.name,
                   api_key_env=model_cfg.api_key_env, max_concurrency=model_cfg.max_concurrency,
                   max_retries=model_cfg.max_retries, request_timeout=model_cfg.request_timeout,
                   retry_backoff=model_cfg.retry_backoff, retry_backoff_max=model_cfg.retry_backoff_max,
                   retry_after_max=model_cfg.retry_after_max, preflight=model_cfg.preflight)

    def __repr__(self) -> str:  # never shows the Authorization header
        return f"ChatClient(url={self.url!r}, model={self.model!r}, max_concurrency={self.max_concurrency})"

    @property
    def served_models(self) -> list[str]:
        """The model ids the server reported in its replies (a hosted API names its snapshot here)."""
        return sorted(self._served)

    def request_body(self, probe, answer_cfg) -> dict[str, Any]:
        return chat_request(probe, answer_cfg, self.model)

    # ------------------------------------------------------------------ one request, retried
    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _session(self):
        session = getattr(self._local, "session", None)
        if session is None:
            import requests

            session = self._local.session = requests.Session()
        return session

    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        if retry_after is not None:
            delay = min(retry_after, self.retry_after_max)
        else:
            delay = random.uniform(0.5, 1.0) * min(self.retry_backoff_max, self.retry_backoff * 2.0 ** min(attempt, 64))
        return min(delay, threading.TIMEOUT_MAX)

    def _key_refused(self, status: int, where: str) -> EndpointUnusable:
        if self.api_key_env is None:
            advice = "no key was sent: set model.api_key_env to the name of the variable that holds it"
        else:
            advice = (f"the key in the environment variable {self.api_key_env} (model.api_key_env) was refused: "
                      "check it, or its access to this model")
        return EndpointUnusable(f"HTTP {status} from {where}: {advice}", ErrorCause.http_4xx)

    def _send(self, method: str, url: str, body: Optional[dict], stop: threading.Event):
        """The response to one request, retrying connection errors, timeouts, 429 and 5xx; an
        :class:`AnswerError` when they persist, :class:`EndpointUnusable` on 401/403."""
        import requests

        attempt = 0
        while True:
            if stop.is_set():
                raise _Stopped
            retry_after = None
            try:
                response = self._session().request(method, url, json=body, headers=self._headers,
                                                   timeout=self.request_timeout)
            except requests.Timeout as error:
                failure, cause = f"Timeout: {error}", ErrorCause.timeout
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as error:
                failure, cause = f"{type(error).__name__}: {error}", ErrorCause.connection
            except requests.RequestException as error:  # an invalid URL or header: asking again cannot help
                raise AnswerError(self._redact(f"{type(error).__name__}: {error}"), ErrorCause.connection) from None
            else:
                if response.status_code in _AUTH:
                    raise self._key_refused(response.status_code, url)
                if response.status_code < 400:
                    return response
                cause = _cause_of_status(response.status_code)
                failure = f"HTTP {response.status_code} from {url}: {_server_message(response)}"
                if cause is ErrorCause.http_4xx:
                    raise AnswerError(self._redact(failure), cause)
                retry_after = _retry_after(response.headers.get("Retry-After"))
            if attempt == self.max_retries:
                raise AnswerError(self._redact(f"{failure} (gave up after {attempt + 1} attempts)"), cause)
            if stop.wait(self._delay(attempt, retry_after)):
                raise _Stopped
            attempt += 1

    def complete(self, body: dict[str, Any], stop: Optional[threading.Event] = None) -> str:
        """The reply text to one request (see :func:`reply_text`), retrying transient failures."""
        response = self._send("POST", self.url, body, stop or threading.Event())
        try:
            payload = response.json()
        except ValueError:
            raise AnswerError(f"malformed reply from {self.url}: the body is not JSON", ErrorCause.malformed) from None
        try:
            text = reply_text(payload)
        except AnswerError as error:
            raise AnswerError(self._redact(str(error)), error.cause, self._redact(error.text)) from None
        echoed = payload.get("temperature")
        if isinstance(echoed, (int, float)) and float(echoed) != body["temperature"]:
            raise AnswerError(f"the server reports temperature {echoed} for a request sent with temperature "
                              f"{body['temperature']}", ErrorCause.malformed)
        if isinstance(payload.get("model"), str):
            with self._served_lock:
                self._served.add(payload["model"])
        return self._redact(text)

    def check_endpoint(self, stop: Optional[threading.Event] = None) -> None:
        """The pre-flight request: the endpoint answers, accepts the key and serves the model id
        (checked when it lists its models at ``GET <base_url>/models``); else EndpointUnusable."""
        where = f"{self.base_url}/models"
        try:
            response = self._send("GET", where, None, stop or threading.Event())
        except AnswerError as error:
            if error.cause is ErrorCause.http_4xx:
                log.info("pre-flight: %s; the model id is not checked before the probes", error)
                return
            raise EndpointUnusable(f"pre-flight request to {where} failed ({error.cause.value}): {error}; no probe "
                                   "was asked", error.cause) from None
        try:
            served = [entry.get("id") for entry in response.json().get("data", [])]
        except (ValueError, AttributeError, TypeError):
            log.info("pre-flight: %s lists no models in the OpenAI shape; the model id is not checked", where)
            return
        if served and self.model not in served:
            shown = ", ".join(map(str, served[:10])) + (" ..." if len(served) > 10 else "")
            raise EndpointUnusable(f"pre-flight: {where} does not serve the model {self.model!r} (it serves {shown}); "
                                   "set model.pretrained to the served id", ErrorCause.http_4xx)

    # ------------------------------------------------------------------ a probe set
    def _answer_one(self, probe, answer_cfg, stop: threading.Event) -> dict[str, Any]:
        try:
            body = self.request_body(probe, answer_cfg)
        except (OSError, ValueError) as error:  # the probe's image
            return error_row(probe, ErrorCause.input, str(error))
        try:
            reply = self.complete(body, stop)
        except AnswerError as error:
            return error_row(probe, error.cause, str(error), error.text)
        return response_row(probe, reply)

    def answer_probes(self, probes: Sequence, answer_cfg, progress: bool = True):
        """The response table of ``probes`` (one row per probe, in probe order)."""
        from tqdm.auto import tqdm

        check_answer_config(answer_cfg)
        if AnswerMode(answer_cfg.mode) is not AnswerMode.generate:
            raise ValueError(f"answer.mode={AnswerMode(answer_cfg.mode).value}: a black-box model answers by "
                             "generation only; set answer.mode=generate")
        probes = list(probes)
        ids = [probe.probe_id for probe in probes]
        if len(set(ids)) != len(ids):
            duplicated = sorted({probe_id for probe_id in ids if ids.count(probe_id) > 1})[:3]
            raise ValueError(f"duplicate probe ids, e.g. {duplicated}")
        stop = threading.Event()
        rows: list[Optional[dict]] = [None] * len(probes)
        try:
            if self.preflight and not self._checked:
                self.check_endpoint(stop)
                self._checked = True
            with tqdm(total=len(probes), desc=f"answers from {self.model}", unit="probe",
                      disable=None if progress else True, leave=False) as bar:
                for index, row in self._answered(probes, answer_cfg, stop):
                    rows[index] = row
                    bar.update(1)
        finally:
            stop.set()  # on any way out (a signal, a refused key): no new request, no back-off continues
        table = response_table(rows, ids)
        errors = table[table["status"] == Status.error.value]
        if len(errors):
            log.warning("%d of %d probes got no answer from %s (%s); first: %s", len(errors), len(table), self.url,
                        ", ".join(f"{cause} {count}" for cause, count in errors["error_cause"].value_counts().items()),
                        errors["error"].iloc[0])
        return table

    def _answered(self, probes: list, answer_cfg, stop: threading.Event):
        """``(index, row)`` as the workers finish; a worker's fatal error is raised here."""
        tasks: queue.SimpleQueue = queue.SimpleQueue()
        for item in enumerate(probes):
            tasks.put(item)
        done: queue.Queue = queue.Queue()  # a plain lock wait: a signal interrupts it in the main thread

        def work() -> None:
            try:
                self._local.session = self._idle_sessions.get_nowait()
            except queue.Empty:
                pass
            try:
                while not stop.is_set():
                    try:
                        index, probe = tasks.get_nowait()
                    except queue.Empty:
                        return
                    try:
                        done.put((index, self._answer_one(probe, answer_cfg, stop)))
                    except _Stopped:
                        return
                    except BaseException as error:  # EndpointUnusable, or a bug: the caller raises it
                        done.put((index, error))
                        return
            finally:
                if getattr(self._local, "session", None) is not None:
                    self._idle_sessions.put(self._local.session)

        for number in range(min(self.max_concurrency, len(probes))):
            threading.Thread(target=work, name=f"medexp-answer-{number}", daemon=True).start()
        for _ in probes:
            index, row = done.get()
            if isinstance(row, BaseException):
                raise row
            yield index, row


def answer_probes(probes: Sequence, model_cfg, answer_cfg, progress: bool = True):
    """The response table of ``probes`` answered by the openai_compatible model ``model_cfg``."""
    return ChatClient.from_model_config(model_cfg).answer_probes(probes, answer_cfg, progress=progress)
