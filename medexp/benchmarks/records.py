"""What every loader shares: upstream rows -> checked, ordered examples.

A format module only translates its files into :class:`SourceRow` records, in file order, never
refusing a file for a bad row: a row unusable for any task carries its ``problem``, a field that
cannot be read (an empty answer, options with a gap) its entry in ``flaws``
(:mod:`medexp.benchmarks.skips` decides what the task needs). :func:`assemble` applies the row
cap, checks images, skips and counts the unusable rows, builds the example ids
``<benchmark>::<split>::<source id>`` and numbers the positions.
"""

from __future__ import annotations

import itertools
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from medexp.benchmarks.base import UPSTREAM_ID, Benchmark, Example, SkippedExample
from medexp.benchmarks.images import image_problem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceRow:
    """One upstream row, in released order, before its image is checked."""

    source_id: Any  # the upstream id (qid, question_id, row index ...); None when unreadable (with a problem)
    question: str
    answer: str
    image: Optional[Path] = None
    options: Optional[tuple[str, ...]] = None
    meta: dict[str, Any] = field(default_factory=dict)
    problem: Optional[str] = None  # known unusable before any check ("<kind>: <detail>")
    image_checked: bool = False  # the image already decoded (it comes from the image store)
    where: Optional[str] = None  # "<file>:<line>" or similar, for error messages
    # field ("question", "answer", "options") -> "<kind>: <where>: <detail>" when it could not be
    # read; the field holds "" (None for options) and the task decides whether that matters.
    flaws: dict[str, str] = field(default_factory=dict)
    # False for a row outside the benchmark's question filters (bench.languages ...), yielded
    # only when the load is an image corpus, which holds every image of the split.
    selected: bool = True
    # The release's own id as its files write it, where the example id's last part differs from it
    # (VQA-RAD's qid 10 for the id "vqa_rad::test::qid10"); None: it is ``source_id``. Kept in the
    # example's meta under UPSTREAM_ID, so other tools' records join by the release's id.
    upstream_id: Any = None


DUPLICATE_ID = "duplicate id"
MISSING_ID = "missing id"


def assemble(
    name: str,
    split: str,
    rows: Iterable[SourceRow],
    max_examples: int | None = None,
    root: Path | None = None,
    allow_outside_root: bool = False,
    files: Iterable[Path | str] = (),
) -> Benchmark:
    """Turn rows into a :class:`Benchmark`, reading at most ``max_examples`` rows.

    Skipped rows count toward the cap: it limits how much of the split is read, as in "the first
    5,000 rows", whatever those rows hold. With ``root``, every image file a row names must
    resolve (symlinks included) inside it unless ``allow_outside_root``; images the loader took
    from the content store (``image_checked``) are exempt. A row with a problem, an unreadable
    id or an id already read is skipped with its reason; a row with flawed fields becomes an
    example with its flaws recorded. ``files``: the data files the rows come from, listed on the
    benchmark (and logged) so that what was read is never a guess.
    """
    from tqdm.auto import tqdm

    if max_examples is not None:
        rows = itertools.islice(rows, max_examples)
    files = [str(path) for path in files]
    if files:
        log.info("%s/%s: reading %s", name, split, ", ".join(files))
    examples: list[Example] = []
    skipped: list[SkippedExample] = []
    flaws: dict[str, dict[str, str]] = {}
    outside: set[str] = set()
    problems: dict[Path, str | None] = {}  # each image is decoded once, however many questions share it
    seen: dict[str, str | None] = {}  # example id -> where it was first read
    for row in tqdm(rows, desc=f"loading {name}/{split}", unit="row", total=max_examples, disable=None, leave=False):
        if row.source_id is None:
            skipped.append(SkippedExample(None, row.problem or f"{MISSING_ID}: {row.where}", row.where))
            continue
        example_id = f"{name}::{split}::{row.source_id}"
        if example_id in seen:
            first = seen[example_id] or "an earlier row"
            skipped.append(SkippedExample(None, f"{DUPLICATE_ID}: {row.where or name}: id {row.source_id!r} was "
                                                f"first read at {first}", row.where))
            continue
        seen[example_id] = row.where
        if root is not None and not allow_outside_root and row.image is not None and not row.image_checked:
            check_inside(root, row.image, row.where or example_id)
        problem = row.problem
        if problem is None and row.image is not None and not row.image_checked:
            if row.image not in problems:
                problems[row.image] = image_problem(row.image)
            problem = problems[row.image]
        if problem:
            skipped.append(SkippedExample(example_id, problem, row.where))
            continue
        if row.flaws:
            flaws[example_id] = dict(row.flaws)
        if not row.selected:
            outside.add(example_id)
        upstream = row.upstream_id if row.upstream_id is not None else row.source_id
        examples.append(
            Example(
                example_id=example_id,
                position=len(examples),
                image=row.image,
                question=row.question,
                answer=row.answer,
                options=row.options,
                meta={UPSTREAM_ID: upstream, **row.meta},
            )
        )
    return Benchmark(name=name, examples=examples, skipped=skipped, files=files, flaws=flaws,
                     outside_selection=frozenset(outside))


MISSING_FIELD = "missing field"
MALFORMED_ROW = "malformed row"


def require_fields(record: dict, fields: Iterable[str], where: str) -> None:
    """Raise :class:`RowProblem` naming the file position and the missing fields when a record lacks any."""
    missing = [key for key in fields if key not in record]
    if missing:
        raise RowProblem(f"{MISSING_FIELD}: {where}: missing field(s) {missing} (has {sorted(record)})")


def require_object(record: Any, where: str, what: str) -> dict:
    """``record`` when it is a JSON object, else :class:`RowProblem` ("malformed row")."""
    if not isinstance(record, dict):
        raise RowProblem(f"{MALFORMED_ROW}: {where}: expected {what} (a JSON object), got {record!r}")
    return record


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


def field_text(record: dict, key: str, where: str, as_field: str | None = None) -> tuple[str, Optional[str]]:
    """``(text, None)`` for a usable ``record[key]``: stripped text, numbers as their decimal text
    (``2`` -> ``"2"``). Otherwise ``("", reason)``, the reason naming ``where`` (the file and line
    or row): ``missing <field>`` for an absent key or a null (never the text "None"), ``empty
    <field>`` for an empty or blank string, ``malformed <field>`` for a nested value, where
    ``<field>`` is ``as_field`` (the example field the key fills: a caption is an answer) or the key."""
    if key not in record or record[key] is None:
        kind, problem = "missing", ("null" if key in record else "missing")
    elif isinstance(record[key], (dict, list, bool)):
        kind, problem = "malformed", f"a JSON {json_type(record[key])} ({record[key]!r})"
    elif not str(record[key]).strip():
        kind, problem = "empty", f"empty ({record[key]!r})"
    else:
        return str(record[key]).strip(), None
    return "", f"{kind} {as_field or key}: {where}: {key} is {problem}"


def text_field(record: dict, key: str, where: str, flaws: dict[str, str], as_field: str | None = None) -> str:
    """``record[key]`` as text (see :func:`field_text`), or ``""`` with the reason recorded in
    ``flaws`` under ``as_field`` (default ``key``): the example field it fills."""
    text, problem = field_text(record, key, where, as_field)
    if problem:
        flaws.setdefault(as_field or key, problem)
    return text


def required_text(record: dict, key: str, where: str) -> str:
    """``record[key]`` as text (see :func:`field_text`); a value a row cannot do without (its id)
    that is unusable raises :class:`RowProblem` with the reason."""
    text, problem = field_text(record, key, where)
    if problem:
        raise RowProblem(problem)
    return text


class RowProblem(ValueError):
    """A row that no task can use (its id or image name cannot be read); the loader turns it into
    a :class:`SourceRow` carrying the reason (:func:`problem_row`), which is skipped and counted."""


def problem_row(problem: RowProblem | str, where: str, source_id: Any = None) -> SourceRow:
    """The row standing for one that could not be read: skipped with ``problem`` as its reason."""
    return SourceRow(source_id=source_id, question="", answer="", problem=str(problem), where=where)


@dataclass(frozen=True)
class LineProblem:
    """Why a line of a JSONL file holds no JSON object: ``reason`` ("not UTF-8", "not JSON", "not a
    JSON object") and the decoder's ``detail``."""

    reason: str
    detail: str


def json_object_lines(path: Path) -> Iterator[tuple[int, str, dict | LineProblem]]:
    """``(line number, "<file>:<line>", object)`` for every non-blank line of a JSONL file, lazily,
    the object replaced by a :class:`LineProblem` on a line that holds none. A byte-order mark is
    accepted, as by every reader (utf-8-sig)."""
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            where = f"{path}:{line_number}"
            try:
                line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                yield line_number, where, LineProblem("not UTF-8", f"{error.reason} at byte {error.start}")
                continue
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                yield line_number, where, LineProblem("not JSON", f"{error.msg} (column {error.colno})")
                continue
            if not isinstance(record, dict):
                yield line_number, where, LineProblem("not a JSON object", f"a JSON {type(record).__name__}")
                continue
            yield line_number, where, record


def jsonl_records(path: Path) -> Iterable[tuple[str, dict | RowProblem]]:
    """``("<file>:<line>", record)`` for every non-blank line of a JSONL file, lazily; a line that
    is not UTF-8, not valid JSON or not a JSON object gives a :class:`RowProblem` ("malformed
    row", naming the file and line) in place of its record."""
    for _, where, record in json_object_lines(path):
        if isinstance(record, LineProblem):
            yield where, RowProblem(f"{MALFORMED_ROW}: {where}: {record.reason}: {record.detail}")
        else:
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
