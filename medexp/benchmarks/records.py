"""What every loader shares: upstream rows -> checked, ordered examples.

A format module only translates its files into :class:`SourceRow` records, in file order;
:func:`assemble` applies the row cap, checks images, skips and counts the unusable rows, builds
the example ids ``<benchmark>::<split>::<source id>`` and numbers the positions.
"""

from __future__ import annotations

import itertools
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


def assemble(name: str, split: str, rows: Iterable[SourceRow], max_examples: int | None = None) -> Benchmark:
    """Turn rows into a :class:`Benchmark`, reading at most ``max_examples`` rows.

    Skipped rows count toward the cap: it limits how much of the split is read, as in "the first
    5,000 rows", whatever those rows hold.
    """
    from tqdm.auto import tqdm

    if max_examples is not None:
        rows = itertools.islice(rows, max_examples)
    examples: list[Example] = []
    skipped: list[SkippedExample] = []
    problems: dict[Path, str | None] = {}  # each image is decoded once, however many questions share it
    for row in tqdm(rows, desc=f"loading {name}/{split}", unit="row", total=max_examples, disable=None, leave=False):
        example_id = f"{name}::{split}::{row.source_id}"
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


def jsonl_records(path: Path) -> Iterable[tuple[str, dict]]:
    """``("<file>:<line>", record)`` for every non-blank line of a JSONL file, lazily."""
    import json

    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if line.strip():
                yield f"{path}:{line_number}", json.loads(line)


def split_file(name: str, root: Path, file_name: str) -> Path:
    """``<root>/<file_name>``, or an error naming the benchmark and the path it expected."""
    path = Path(root) / file_name
    if not path.is_file():
        raise FileNotFoundError(f"benchmark {name!r}: no {file_name} under {root} (expected {path})")
    return path
