"""The response table: one row per probe, whatever answered it (DESIGN.md, "Answers and probes").

Columns:

- ``probe_id``, ``example_id``, ``kind``: from the probe;
- ``gold``: the gold letter (multiple choice) or gold text;
- ``refusal``: the letter of the probe's refusal option, or None;
- ``response``: the raw reply ("" when the model could not be asked; an ``error`` row keeps the
  text it got, e.g. a content filter's refusal or a reply of the wrong shape);
- ``choice``: the parsed letter, or the normalised free-text answer; None when unparsed or error;
- ``correct``: True only for status ``ok`` with ``choice`` equal to the gold;
- ``status``: ``ok``, ``unparsed`` or ``error``. ``ok`` and ``unparsed`` rows are *answered*
  (the model replied; an unparseable reply is a wrong answer). An ``error`` row is no answer at
  all: detectors leave it out of every denominator, never count it wrong or right;
- ``error``: the error message of an ``error`` row, else None;
- ``error_cause``: why an ``error`` row has no answer (:class:`ErrorCause`), else None;
- ``option_logliks``: per-option log-likelihoods when answered by likelihood, else None.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any, Optional

RESPONSE_COLUMNS = (
    "probe_id", "example_id", "kind", "gold", "refusal", "response", "choice", "correct", "status", "error",
    "error_cause", "option_logliks",
)


class Status(str, Enum):
    ok = "ok"
    unparsed = "unparsed"
    error = "error"


class ErrorCause(str, Enum):
    """Why a probe has no answer (metric ``n_errors.<cause>``)."""

    connection = "connection"  # the server could not be reached, or dropped the connection
    timeout = "timeout"  # no reply within model.request_timeout
    http_4xx = "http_4xx"  # the server refused the request (400, 404, 413, 422 ...)
    http_5xx = "http_5xx"  # the server failed (500, 502, 503 ...)
    rate_limited = "rate_limited"  # HTTP 429, still after the retries
    malformed = "malformed"  # a reply (or an imported line) of a shape that holds no usable answer
    refused = "refused"  # a content filter or the API's refusal field: its text is kept in `response`
    input = "input"  # the probe could not be sent (its image is unreadable)
    not_imported = "not_imported"  # an imported file has no line for the probe
    other = "other"  # an imported harness's error of no recognisable cause


# The cause of a harness's error message: the first pattern that matches.
_MESSAGE_CAUSES = (
    (re.compile(r"time[ds]?[ _-]?out", re.I), ErrorCause.timeout),
    (re.compile(r"\b429\b|rate[ _-]?limit", re.I), ErrorCause.rate_limited),
    (re.compile(r"\b5\d\d\b"), ErrorCause.http_5xx),
    (re.compile(r"\b4\d\d\b"), ErrorCause.http_4xx),
    (re.compile(r"connect", re.I), ErrorCause.connection),
    (re.compile(r"content[ _-]?filter|refus", re.I), ErrorCause.refused),
)


def cause_of_message(text: str) -> ErrorCause:
    """The cause a harness's error message names (timeout, HTTP 503, ...), else ``other``."""
    return next((cause for pattern, cause in _MESSAGE_CAUSES if pattern.search(text)), ErrorCause.other)


def response_row(probe, response: str, choice: Optional[str], status: Status | str, error: Optional[str] = None,
                 option_logliks: Optional[list[float]] = None,
                 cause: ErrorCause | str | None = None) -> dict[str, Any]:
    """A response-table row for ``probe`` (a :class:`medexp.probes.Probe`), with ``correct`` derived.
    An ``error`` row needs its message and its ``cause``."""
    status = Status(status)
    if status is Status.ok and choice is None:
        raise ValueError(f"{probe.probe_id}: an ok row needs a parsed choice")
    if status is Status.error and (not error or cause is None):
        raise ValueError(f"{probe.probe_id}: an error row needs its error message and cause")
    return {
        "probe_id": probe.probe_id,
        "example_id": probe.example_id,
        "kind": probe.kind,
        "gold": probe.gold,
        "refusal": probe.refusal,
        "response": response,
        "choice": choice if status is Status.ok else None,
        "correct": bool(status is Status.ok and choice == probe.gold),
        "status": status.value,
        "error": error if status is Status.error else None,
        "error_cause": ErrorCause(cause).value if status is Status.error else None,
        "option_logliks": list(option_logliks) if option_logliks is not None else None,
    }


def error_row(probe, cause: ErrorCause | str, error: str, response: str = "") -> dict[str, Any]:
    """The ``error`` row of a probe that got no answer, and why."""
    return response_row(probe, response, None, Status.error, error=error, cause=cause)


def response_table(rows: list[dict[str, Any]], probe_ids):
    """A response table (pandas) from :func:`response_row` rows, checked against ``probe_ids``.

    Text columns stay ``object`` so that a missing choice, refusal or error is None (pandas 3 would
    infer a string dtype and turn them into NaN); ``correct`` is bool.
    """
    import pandas as pd

    return as_response_table(pd.DataFrame(rows, columns=list(RESPONSE_COLUMNS), dtype=object), probe_ids)


def as_response_table(frame, probe_ids):
    """``frame`` with the response table's types (a missing text is None, never NaN; ``correct``
    is bool), checked against ``probe_ids``; e.g. a table read back from parquet."""
    if "error_cause" not in frame.columns and "status" in frame.columns and "error" in frame.columns:
        # Cached before causes were recorded: only answered rows are ever read back from the cache
        # (its error rows are asked again), so every cause is None.
        frame = frame.assign(error_cause=None)
    table = frame.astype({column: object for column in RESPONSE_COLUMNS if column in frame and column != "correct"})
    for column in ("refusal", "choice", "error", "error_cause", "option_logliks"):
        if column in table:
            table[column] = table[column].where(table[column].notna(), None)
    if "correct" in table:
        table["correct"] = table["correct"].astype(bool)
    check_response_table(table, probe_ids)
    return table


def check_response_table(table, probe_ids) -> None:
    """Fail unless ``table`` has the response columns and exactly one row per probe, in order."""
    missing = [column for column in RESPONSE_COLUMNS if column not in table.columns]
    if missing:
        raise ValueError(f"response table lacks column(s) {missing}")
    got, expected = list(table["probe_id"]), list(probe_ids)
    if got != expected:
        extra = sorted(set(got) - set(expected))[:3]
        absent = sorted(set(expected) - set(got))[:3]
        raise ValueError(f"response table rows do not match the probes ({len(got)} rows for {len(expected)} probes; "
                         f"unexpected e.g. {extra}, missing e.g. {absent}; order must follow the probes)")
    bad = sorted(set(table["status"]) - {status.value for status in Status})
    if bad:
        raise ValueError(f"response table has unknown status value(s) {bad}")
    errors = table["status"] == Status.error.value
    causes = set(table.loc[errors, "error_cause"])
    unknown = sorted(map(str, causes - {cause.value for cause in ErrorCause}))
    if unknown:
        raise ValueError(f"response table has error row(s) without a known cause: {unknown}; "
                         f"causes are {[cause.value for cause in ErrorCause]}")


def answered(table):
    """The rows of ``table`` that hold an answer (status ``ok`` or ``unparsed``): never an error row."""
    return table[table["status"] != Status.error.value]
