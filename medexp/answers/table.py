"""The response table: one row per probe, whatever answered it (DESIGN.md, "Answers and probes").

Columns:

- ``probe_id``, ``example_id``, ``kind``: from the probe;
- ``gold``: the gold letter (multiple choice) or gold text;
- ``refusal``: the letter of the probe's refusal option, or None;
- ``response``: the raw reply ("" when the model could not be asked);
- ``choice``: the parsed letter, or the normalised free-text answer; None when unparsed or error;
- ``correct``: True only for status ``ok`` with ``choice`` equal to the gold (errors and unparsed
  replies are never correct, and never dropped: metrics count them, or exclude them explicitly);
- ``status``: ``ok``, ``unparsed`` or ``error``;
- ``error``: the error message of an ``error`` row, else None;
- ``option_logliks``: per-option log-likelihoods when answered by likelihood, else None.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Optional

RESPONSE_COLUMNS = (
    "probe_id", "example_id", "kind", "gold", "refusal", "response", "choice", "correct", "status", "error",
    "option_logliks",
)


class Status(str, Enum):
    ok = "ok"
    unparsed = "unparsed"
    error = "error"


def response_row(probe, response: str, choice: Optional[str], status: Status | str, error: Optional[str] = None,
                 option_logliks: Optional[list[float]] = None) -> dict[str, Any]:
    """A response-table row for ``probe`` (a :class:`medexp.probes.Probe`), with ``correct`` derived."""
    status = Status(status)
    if status is Status.ok and choice is None:
        raise ValueError(f"{probe.probe_id}: an ok row needs a parsed choice")
    if status is Status.error and not error:
        raise ValueError(f"{probe.probe_id}: an error row needs its error message")
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
        "option_logliks": list(option_logliks) if option_logliks is not None else None,
    }


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
    table = frame.astype({column: object for column in RESPONSE_COLUMNS if column != "correct"})
    for column in ("refusal", "choice", "error", "option_logliks"):
        table[column] = table[column].where(table[column].notna(), None)
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
