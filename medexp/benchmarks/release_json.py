"""The JSON files of official releases, read with errors that name the file, the row and the field.

Release files are written by hand or by spreadsheet exports, so they carry byte-order marks,
numbers where text is expected (a VQA-RAD answer ``2``) and blank cells; these helpers accept the
harmless variations and reject the rest with a message a person can act on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_JSON_TYPES = {dict: "object", list: "list", str: "string", int: "number", float: "number", bool: "boolean"}


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type ("object", "list", "null" ...)."""
    return "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)


def read_json(path: Path, expected: type, what: str) -> Any:
    """The decoded content of ``path``, which must be a JSON ``expected`` (``list`` or ``dict``).

    ``what`` describes the expected content for the error message ("a JSON list of question
    records"). A byte-order mark is accepted; malformed JSON fails naming the file, line and column.
    """
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}") from error
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error})") from error
    if not isinstance(value, expected):
        raise ValueError(f"{path}: expected {what}, got a JSON {json_type(value)}")
    return value


def required_text(record: dict, key: str, where: str) -> str:
    """``record[key]`` as stripped text; numbers become their decimal text (``2`` -> ``"2"``).

    A missing key, a null, an empty or blank string, or a nested value fails naming ``where``.
    """
    if key not in record:
        problem = "missing"
    else:
        value = record[key]
        if value is None:
            problem = "null"
        elif isinstance(value, (dict, list, bool)):
            problem = f"a JSON {json_type(value)} ({value!r})"
        elif not str(value).strip():
            problem = f"empty ({value!r})"
        else:
            return str(value).strip()
    raise ValueError(f"{where}: {key} is {problem}; every row needs a non-empty text or number {key}")
