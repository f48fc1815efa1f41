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


def required_text(record: dict, key: str, where: str) -> str:
    """``record[key]`` as text; a missing, null or empty value (or a list/object) is an error
    naming the position. Numbers are kept as their text (VQA-RAD has integer answers)."""
    if key not in record:
        raise ValueError(f"{where}: missing field {key!r} (has {sorted(record)})")
    value = record[key]
    if value is None or isinstance(value, (bool, list, dict)):
        raise ValueError(f"{where}: field {key!r} is {json_repr(value)}, expected text")
    text = str(value)
    if not text.strip():
        raise ValueError(f"{where}: field {key!r} is empty")
    return text


def json_repr(value: Any) -> str:
    return json.dumps(value)


def jsonl_records(path: Path) -> Iterable[tuple[str, dict]]:
    """``("<file>:<line>", record)`` for every non-blank line of a JSONL file, lazily.

    A line that is not UTF-8, not valid JSON or not a JSON object fails with its file and line.
    """
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            where = f"{path}:{line_number}"
            try:
                line = raw.decode("utf-8")
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
