"""Black-box answering through an OpenAI-compatible chat-completions API (vLLM, TGI, hosted APIs).

Every request carries the cell's decoding settings as configured (``temperature``, 0 unless
sampling is explicitly allowed; ``max_tokens``; ``seed`` when set); nothing falls back to a server
default. Where a server echoes the temperature it used, the echo is checked against the request
(the chat-completions responses of OpenAI, vLLM and TGI carry no such field, so for them the
request is the record). Requests run in a bounded thread pool; connection errors, timeouts,
HTTP 429 and 5xx are retried with exponential backoff and jitter (a ``Retry-After`` header is
honoured); other 4xx fail at once. A probe whose request still fails becomes an ``error`` row
with its message, never a missing row. Each probe is answered on its own, so any slice of a
probe set gets the rows it would get inside the whole set, whatever order replies arrive in.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Optional

from medexp.answers.parse import judge
from medexp.answers.prompt import render_messages
from medexp.answers.table import Status, response_row, response_table
from medexp.config.schemas.answers import AnswerMode, check_answer_config

log = logging.getLogger("medexp")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXCERPT = 300  # characters of an error body kept in a row's error message


class AnswerError(RuntimeError):
    """A request that got no usable reply (after its retries, where retrying made sense)."""


def _retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _message_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts; None is ""."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    raise AnswerError(f"malformed response: message content of type {type(content).__name__}")


class ChatClient:
    """A chat-completions endpoint answering probes. Build it with :meth:`from_model_config`."""

    def __init__(self, base_url: str, model: str, api_key_env: Optional[str] = None, max_concurrency: int = 4,
                 max_retries: int = 5, request_timeout: float = 60.0, retry_backoff: float = 1.0,
                 retry_backoff_max: float = 60.0):
        if not re.match(r"https?://", base_url or ""):
            raise ValueError(f"model.base_url must be an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1), "
                             f"got {base_url!r}")
        for key, value, least in (("max_concurrency", max_concurrency, 1), ("max_retries", max_retries, 0)):
            if value < least:
                raise ValueError(f"model.{key} must be at least {least}, got {value}")
        if request_timeout <= 0:
            raise ValueError(f"model.request_timeout must be > 0, got {request_timeout}")
        for key, value in (("retry_backoff", retry_backoff), ("retry_backoff_max", retry_backoff_max)):
            if value < 0:
                raise ValueError(f"model.{key} must be >= 0, got {value}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.retry_backoff_max = retry_backoff_max
        self._headers = {"Content-Type": "application/json"}
        if api_key_env is not None:
            if not _ENV_NAME.fullmatch(api_key_env):
                # The value is not echoed: it may be the key itself, pasted where its variable's name belongs.
                raise ValueError("model.api_key_env must name an environment variable (e.g. OPENAI_API_KEY) that "
                                 "holds the key, not hold the key itself")
            key = os.environ.get(api_key_env)
            if not key:
                raise ValueError(f"model.api_key_env names the environment variable {api_key_env}, which is not set "
                                 f"(export {api_key_env}=... before running)")
            self._headers["Authorization"] = f"Bearer {key}"
        self._local = threading.local()
        self._served: set[str] = set()
        self._served_lock = threading.Lock()

    @classmethod
    def from_model_config(cls, model_cfg) -> "ChatClient":
        from medexp.config.schemas import ModelFamily

        if ModelFamily(model_cfg.family) is not ModelFamily.openai_compatible:
            raise ValueError(f"model={model_cfg.name} has family {ModelFamily(model_cfg.family).value}; "
                             "the chat client serves family openai_compatible")
        return cls(base_url=model_cfg.base_url, model=model_cfg.pretrained or model_cfg.name,
                   api_key_env=model_cfg.api_key_env, max_concurrency=model_cfg.max_concurrency,
                   max_retries=model_cfg.max_retries, request_timeout=model_cfg.request_timeout,
                   retry_backoff=model_cfg.retry_backoff, retry_backoff_max=model_cfg.retry_backoff_max)

    def __repr__(self) -> str:  # never shows the Authorization header
        return f"ChatClient(url={self.url!r}, model={self.model!r}, max_concurrency={self.max_concurrency})"

    @property
    def served_models(self) -> list[str]:
        """The model ids the server reported in its replies (a hosted API names its snapshot here)."""
        return sorted(self._served)

    def request_body(self, probe, answer_cfg) -> dict[str, Any]:
        body = {
            "model": self.model,
            "messages": render_messages(probe, answer_cfg),
            "temperature": float(answer_cfg.temperature),
            "max_tokens": int(answer_cfg.max_new_tokens),
            "n": 1,
            "stream": False,
        }
        if answer_cfg.seed is not None:
            body["seed"] = int(answer_cfg.seed)
        return body

    def _session(self):
        session = getattr(self._local, "session", None)
        if session is None:
            import requests

            session = self._local.session = requests.Session()
        return session

    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        if retry_after is not None:
            return retry_after
        return random.uniform(0.5, 1.0) * min(self.retry_backoff_max, self.retry_backoff * 2 ** attempt)

    def complete(self, body: dict[str, Any]) -> str:
        """The reply text to one request, retrying transient failures; AnswerError otherwise."""
        import requests

        retryable = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)
        attempt = 0
        while True:
            retry_after = None
            try:
                response = self._session().post(self.url, json=body, headers=self._headers,
                                                timeout=self.request_timeout)
            except retryable as error:
                failure = f"{type(error).__name__}: {error}"
            else:
                if response.status_code == 200:
                    return self._reply(response, body)
                failure = f"HTTP {response.status_code} from {self.url}: {response.text[:_EXCERPT]}"
                if response.status_code != 429 and response.status_code < 500:
                    raise AnswerError(failure)
                retry_after = _retry_after(response.headers.get("Retry-After"))
            if attempt == self.max_retries:
                raise AnswerError(f"{failure} (gave up after {attempt + 1} attempts)")
            time.sleep(self._delay(attempt, retry_after))
            attempt += 1

    def _reply(self, response, body: dict[str, Any]) -> str:
        try:
            payload = response.json()
            message = payload["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise AnswerError(f"malformed response from {self.url} ({type(error).__name__}: {error}): "
                              f"{response.text[:_EXCERPT]}") from None
        echoed = payload.get("temperature")
        if isinstance(echoed, (int, float)) and float(echoed) != body["temperature"]:
            raise AnswerError(f"the server reports temperature {echoed} for a request sent with temperature "
                              f"{body['temperature']}")
        if isinstance(payload.get("model"), str):
            with self._served_lock:
                self._served.add(payload["model"])
        return _message_text(message.get("content"))

    def _answer_one(self, probe, answer_cfg) -> dict[str, Any]:
        try:
            reply = self.complete(self.request_body(probe, answer_cfg))
        except (AnswerError, OSError, ValueError) as error:  # OSError/ValueError: the probe's image
            return response_row(probe, "", None, Status.error, error=str(error))
        choice, status = judge(probe, reply, answer_cfg)
        return response_row(probe, reply, choice, status)

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
        rows: list[Optional[dict]] = [None] * len(probes)
        pool = ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix="medexp-answer")
        try:
            futures = {pool.submit(self._answer_one, probe, answer_cfg): index for index, probe in enumerate(probes)}
            bar = tqdm(as_completed(futures), total=len(futures), desc=f"answers from {self.model}", unit="probe",
                       disable=None if progress else True, leave=False)
            for future in bar:
                rows[futures[future]] = future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        table = response_table(rows, ids)
        errors = int((table["status"] == Status.error.value).sum())
        if errors:
            log.warning("%d of %d probes got no reply from %s (status error); first: %s", errors, len(table),
                        self.url, table.loc[table["status"] == Status.error.value, "error"].iloc[0])
        return table


def answer_probes(probes: Sequence, model_cfg, answer_cfg, progress: bool = True):
    """The response table of ``probes`` answered by the openai_compatible model ``model_cfg``."""
    return ChatClient.from_model_config(model_cfg).answer_probes(probes, answer_cfg, progress=progress)
