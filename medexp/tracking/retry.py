"""Tracking calls that ride out blips.

A transient error (a connection reset or refused, a timeout, a 5xx, a locked sqlite store, an
exception inside MLflow's HTTP layer such as the ``KeyError`` its telemetry thread once caused) is
retried with exponential backoff before it reaches the cell; any other error is raised at once. A
write refused for space is never retried: it becomes :class:`~medexp.kernel.atomic.DiskFull`, naming the
path and the space left.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any, Callable

from medexp.kernel.atomic import disk_full

log = logging.getLogger(__name__)

# MLflow error codes of a server or store that may answer on the next try. INTERNAL_ERROR is also
# what MLflow's HTTP layer gives a request that failed on the client's side (a reset connection).
TRANSIENT_CODES = ("INTERNAL_ERROR", "TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED")


def is_transient(error: BaseException) -> bool:
    """Whether a tracking call that raised ``error`` may succeed when tried again."""
    import requests
    from mlflow.exceptions import MlflowException

    if disk_full(error) is not None:
        return False
    if isinstance(error, MlflowException):
        return error.error_code in TRANSIENT_CODES or error.get_http_status_code() >= 500
    return isinstance(error, (ConnectionError, TimeoutError, requests.ConnectionError, requests.Timeout))


class RetryingClient:
    """An ``MlflowClient`` (made by ``open_client``) whose every call is tried up to ``1 + retries`` times on transient
    errors, waiting ``backoff_s``, then twice that, and so on between tries. ``where`` names the
    store in a :class:`~medexp.kernel.atomic.DiskFull` (sqlite's message names no file).

    Every call is retried, ``create_run`` included: a run created by a try whose answer was lost
    stays RUNNING until the next command's reconciliation ends it KILLED. Once a call has used up
    its tries, the store counts as down and later calls are tried once until one succeeds, so a
    process whose server died reports it in seconds, not after every call's backoff."""

    def __init__(self, open_client: Callable[[], Any], retries: int, backoff_s: float, where: str) -> None:
        self._retries, self._backoff_s, self._where = int(retries), float(backoff_s), where
        self._down = False
        self._client = self._with_retries(open_client)  # opening a sqlite store creates or migrates it: a write

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        @functools.wraps(attribute)
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._with_retries(attribute, *args, **kwargs)

        return call

    def _with_retries(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        attempt, retries = 0, 0 if self._down else self._retries
        while True:
            try:
                result = function(*args, **kwargs)
                self._down = False
                return result
            except Exception as error:
                full = disk_full(error, self._where)
                if full is not None:
                    raise full from error
                if not is_transient(error):
                    raise
                if attempt == retries:
                    self._down = True
                    raise
                wait = self._backoff_s * 2**attempt
                attempt += 1
                log.warning("tracking call %s failed (%s: %s); try %d of %d in %.1f s",
                            getattr(function, "__name__", function), type(error).__name__, error, attempt + 1,
                            retries + 1, wait)
                time.sleep(wait)
