"""What every loader shares: upstream rows -> checked, ordered examples.

A format module only translates its files into :class:`SourceRow` records, in file order;
:func:`assemble` applies the row cap, checks images, skips and counts the unusable rows, builds
the example ids ``<benchmark>::<split>::<source id>`` and numbers the positions.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from medexp.benchmarks.base import Benchmark, Example, SkippedExample
from medexp.benchmarks.images import image_problem


@dataclass(frozen=True)
class SourceRow:
    """One upstream row, in released order, before its image is checked."""

    source_id: Any  # the upstream id (qid, question_id, row index ...)
    question: str
    answer: str
    image: Optional[Path] = None
    options: Optional[tuple[str, ...]] = None
    meta: dict[str, Any] = field(default_factory=dict)
    problem: Optional[str] = None  # known unusable before any check ("<kind>: <detail>")
    image_checked: bool = False  # the image already decoded (it comes from the image store)
    where: Optional[str] = None  # "<file>:<line>" or similar, for error messages


def assemble(
    name: str,
    split: str,
    rows: Iterable[SourceRow],
    max_examples: int | None = None,
    root: Path | None = None,
    allow_outside_root: bool = False,
) -> Benchmark:
    """Turn rows into a :class:`Benchmark`, reading at most ``max_examples`` rows.

    Skipped rows count toward the cap: it limits how much of the split is read, as in "the first
    5,000 rows", whatever those rows hold. With ``root``, every image file a row names must
    resolve (symlinks included) inside it unless ``allow_outside_root``; images the loader took
    from the content store (``image_checked``) are exempt.
    """
    from tqdm.auto import tqdm

    if max_examples is not None:
        rows = itertools.islice(rows, max_examples)
    examples: list[Example] = []
    skipped: list[SkippedExample] = []
    problems: dict[Path, str | None] = {}  # each image is decoded once, however many questions share it
    seen: dict[str, str | None] = {}  # example id -> where it was first read
    for row in tqdm(rows, desc=f"loading {name}/{split}", unit="row", total=max_examples, disable=None, leave=False):
        example_id = f"{name}::{split}::{row.source_id}"
        if example_id in seen:
            raise ValueError(f"{row.where or name}: duplicate id {row.source_id!r} (first read at {seen[example_id] or 'an earlier row'})")
        seen[example_id] = row.where
        if root is not None and not allow_outside_root and row.image is not None and not row.image_checked:
            check_inside(root, row.image, row.where or example_id)
        problem = row.problem
        if problem is None and row.image is not None and not row.image_checked:
            if row.image not in problems:
                problems[row.image] = image_problem(row.image)
            problem = problems[row.image]
        if problem:
            skipped.append(SkippedExample(example_id, problem))
            continue
        examples.append(
            Example(
                example_id=example_id,
                position=len(examples),
                image=row.image,
                question=row.question,
                answer=row.answer,
                options=row.options,
                meta=row.meta,
            )
        )
    return Benchmark(name=name, examples=examples, skipped=skipped)


def require_fields(record: dict, fields: Iterable[str], where: str) -> None:
    """Fail with the file position and the missing field names when a record lacks any."""
    missing = [key for key in fields if key not in record]
    if missing:
        raise ValueError(f"{where}: missing field(s) {missing} (has {sorted(record)})")


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

    A missing key, a null (never the text "None"), an empty or blank string, or a nested value
    fails naming ``where`` (the file and line or row).
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


def jsonl_records(path: Path) -> Iterable[tuple[str, dict]]:
    """``("<file>:<line>", record)`` for every non-blank line of a JSONL file, lazily.

    A byte-order mark is accepted, as by every reader (utf-8-sig). A line that is not UTF-8, not
    valid JSON or not a JSON object fails with its file and line.
    """
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            where = f"{path}:{line_number}"
            try:
                line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{where}: not UTF-8 text ({error.reason} at byte {error.start})") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{where}: malformed JSON: {error.msg} (column {error.colno})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
            yield where, record


def check_inside(root: Path, image: Path, where: str) -> None:
    """Refuse an image path that resolves (symlinks included) outside the benchmark ``root``,
    such as ``../../etc/passwd`` or a symlink leaving the benchmark folder."""
    resolved, base = Path(image).resolve(), Path(root).resolve()
    if not resolved.is_relative_to(base):
        raise ValueError(
            f"{where}: image path {str(image)!r} resolves to {resolved}, outside the benchmark root {base} "
            "(set bench.allow_outside_root=true if that is intended)"
        )


def split_file(name: str, root: Path, file_name: str) -> Path:
    """``<root>/<file_name>``, or an error naming the benchmark and the path it expected."""
    path = Path(root) / file_name
    if not path.is_file():
        raise FileNotFoundError(f"benchmark {name!r}: no {file_name} under {root} (expected {path})")
    return path
