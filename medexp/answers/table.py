"""The response table (what each model said) and the judged table (what it means), one row per
probe, whatever answered it (DESIGN.md, "Answers and probes").

Response table columns:

- ``probe_id``, ``example_id``, ``kind``: from the probe;
- ``gold``: the gold letter (multiple choice) or gold text;
- ``refusal``: the letter of the probe's refusal option, or None;
- ``response``: the raw reply ("" when the model could not be asked; an ``error`` row keeps the
  text it got, e.g. a content filter's refusal or a reply of the wrong shape);
- ``choice``: the option (letter or candidate text) a white-box model chose by likelihood; None for
  a generated reply, whose meaning is the judge's to read;
- ``status``: ``ok`` (the model replied) or ``error`` (no reply);
- ``error``: the error message of an ``error`` row, else None;
- ``error_cause``: why an ``error`` row has no reply (:class:`ErrorCause`), else None;
- ``option_logliks``: per-option log-likelihoods when answered by likelihood, else None.

The judged table (:mod:`medexp.answers.judges.stage`) adds what the cell's judge read:
``committed`` (the answer the reply commits to, normalised; "" when none), ``verdict``
(``correct``, ``wrong``, ``no_answer``, ``error``), ``judge``, ``reason`` and ``score`` (a harness
judge's per-reply credit, else None), and derives
``choice`` (the committed answer of an answered row), ``correct`` (verdict ``correct``) and
``status``: ``ok`` (an answer, right or wrong), ``no_answer`` (a reply committing to no answer: a
refusal, both options, another question, noise; counted as not correct) or ``error`` (no reply:
detectors leave it out of every denominator, never count it wrong or right).
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any, Optional

RESPONSE_COLUMNS = (
    "probe_id", "example_id", "kind", "gold", "refusal", "response", "choice", "status", "error",
    "error_cause", "option_logliks",
)
JUDGED_COLUMNS = (*RESPONSE_COLUMNS, "committed", "verdict", "judge", "reason", "score", "correct")


class Status(str, Enum):
    ok = "ok"  # a reply (response table); an answer, right or wrong (judged table)
    no_answer = "no_answer"  # judged table only: a reply committing to no answer
    error = "error"  # no reply


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
    judge = "judge"  # judged table only: the judge could not read the reply (a judge model's request
    # failed), or a harness judge's published metric leaves it out of its denominator
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


def response_row(probe, response: str, choice: Optional[str] = None, status: Status | str = Status.ok,
                 error: Optional[str] = None, option_logliks: Optional[list[float]] = None,
                 cause: ErrorCause | str | None = None) -> dict[str, Any]:
    """A response-table row for ``probe`` (a :class:`medexp.probes.Probe`): a reply (``ok``) or
    none (``error``, which needs its message and its ``cause``). ``choice``: the option a model
    chose by likelihood."""
    status = Status(status)
    if status is Status.no_answer:
        raise ValueError(f"{probe.probe_id}: a response row records a reply or its absence; whether it answers "
                         "is the judge's to say")
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
        "status": status.value,
        "error": error if status is Status.error else None,
        "error_cause": ErrorCause(cause).value if status is Status.error else None,
        "option_logliks": list(option_logliks) if option_logliks is not None else None,
    }


def error_row(probe, cause: ErrorCause | str, error: str, response: str = "") -> dict[str, Any]:
    """The ``error`` row of a probe that got no reply, and why."""
    return response_row(probe, response, None, Status.error, error=error, cause=cause)


def response_table(rows: list[dict[str, Any]], probe_ids):
    """A response table (pandas) from :func:`response_row` rows, checked against ``probe_ids``.

    Text columns stay ``object`` so that a missing choice, refusal or error is None (pandas 3 would
    infer a string dtype and turn them into NaN).
    """
    import pandas as pd

    return as_response_table(pd.DataFrame(rows, columns=list(RESPONSE_COLUMNS), dtype=object), probe_ids)


def as_response_table(frame, probe_ids):
    """``frame`` with the response table's types (a missing text is None, never NaN; ``correct``,
    where judged, is bool), checked against ``probe_ids``; e.g. a table read back from parquet."""
    table = frame.astype({column: object for column in JUDGED_COLUMNS
                          if column in frame and column not in ("correct", "score")})
    for column in ("refusal", "choice", "error", "error_cause", "option_logliks"):
        if column in table:
            table[column] = table[column].where(table[column].notna(), None)
    if "correct" in table:
        table["correct"] = table["correct"].astype(bool)
    check_response_table(table, probe_ids)
    return table


def check_judged_table(table, probe_ids) -> None:
    """Fail unless ``table`` is a judged table (its judge's columns too) with one row per probe, in order."""
    missing = [column for column in JUDGED_COLUMNS if column not in table.columns]
    if missing:
        raise ValueError(f"judged table lacks column(s) {missing}: the replies were not judged")
    check_response_table(table, probe_ids)


def check_response_table(table, probe_ids) -> None:
    """Fail unless ``table`` has the response columns and exactly one row per probe, in order (a
    response table's status is ok or error; a judged table's may be no_answer too)."""
    missing = [column for column in RESPONSE_COLUMNS if column not in table.columns]
    if missing:
        raise ValueError(f"response table lacks column(s) {missing}")
    got, expected = list(table["probe_id"]), list(probe_ids)
    if got != expected:
        extra = sorted(set(got) - set(expected))[:3]
        absent = sorted(set(expected) - set(got))[:3]
        raise ValueError(f"response table rows do not match the probes ({len(got)} rows for {len(expected)} probes; "
                         f"unexpected e.g. {extra}, missing e.g. {absent}; order must follow the probes)")
    allowed = {status.value for status in Status} if "verdict" in table.columns else {Status.ok.value,
                                                                                      Status.error.value}
    bad = sorted(set(table["status"]) - allowed)
    if bad:
        raise ValueError(f"response table has unknown status value(s) {bad}")
    errors = table["status"] == Status.error.value
    causes = set(table.loc[errors, "error_cause"])
    unknown = sorted(map(str, causes - {cause.value for cause in ErrorCause}))
    if unknown:
        raise ValueError(f"response table has error row(s) without a known cause: {unknown}; "
                         f"causes are {[cause.value for cause in ErrorCause]}")

