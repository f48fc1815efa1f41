"""Other tools' names for a benchmark's items (``bench.external_ids``), and joining their tables.

medexp names an item ``<bench>::<split>::<upstream id>`` (``pathvqa::test::2892``). Other tools
write the same item differently: the controlled audit's published per-item files
(``outputs/tail_enrichment_topk/<model>__<bench>.json``, a JSON list of ``{"example_id": ...,
"delta": ...}``) write ``pathvqa::test::002892`` (the row index zero-padded to 6 digits) and
``slake_en::test::12748`` (another benchmark name). A bench config declares the scheme:

    external_ids: {prefix: slake_en}          # slake::test::12748   <-> slake_en::test::12748
    external_ids: {padding: 6}                # pathvqa::test::2892  <-> pathvqa::test::002892
    external_ids: {aliases: [slake_english]}  # another name accepted when reading

and :func:`join_table` matches an external per-item table to medexp's ids (used by
``python -m medexp.inspect --join=<file>`` and the report's ``external_tables``). Reading is
lenient where the scheme allows: medexp's own name and every alias are accepted as the prefix,
and a zero-padded number matches the unpadded id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

DEFAULT_ID_COLUMN = "example_id"
TABLE_SUFFIXES = (".json", ".jsonl", ".csv", ".tsv", ".parquet")


@dataclass(frozen=True)
class IdScheme:
    """How another tool writes the ids of benchmark ``name`` (see the module docstring)."""

    name: str  # medexp's benchmark name, the first part of its ids
    prefix: str  # the other tool's
    padding: Optional[int] = None
    aliases: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, bench_cfg) -> "IdScheme":
        """The scheme ``bench.external_ids`` declares (medexp's own ids when it is unset)."""
        declared = bench_cfg.get("external_ids") or {}
        return cls(str(bench_cfg.name), str(declared.get("prefix") or bench_cfg.name), declared.get("padding"),
                   tuple(str(alias) for alias in declared.get("aliases") or ()))

    def external(self, example_id: str) -> str:
        """medexp's ``<bench>::<split>::<id>`` as the other tool writes it."""
        _, split, source = _parts(example_id)
        if self.padding and source.isdigit():
            source = source.zfill(self.padding)
        return f"{self.prefix}::{split}::{source}"

    def internal(self, external_id: Any) -> Optional[str]:
        """The medexp id of another tool's id, or None when it does not name this benchmark."""
        try:
            prefix, split, source = _parts(str(external_id).strip())
        except ValueError:
            return None
        if prefix not in (self.prefix, self.name, *self.aliases):
            return None
        if self.padding and source.isdigit():
            source = str(int(source))
        return f"{self.name}::{split}::{source}"


def _parts(example_id: str) -> tuple[str, str, str]:
    parts = example_id.split("::", 2)
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"{example_id!r} is not <benchmark>::<split>::<id>")
    return parts[0], parts[1], parts[2]


def read_table(path: str | Path):
    """A per-item table as a DataFrame: a JSON list of objects (the audit's top-K files), JSON
    lines, CSV, TSV or parquet, told apart by the file's suffix."""
    import pandas as pd

    path = Path(path)
    suffix = path.suffix.lower()
    if not path.is_file():
        raise FileNotFoundError(f"no external table {path}")
    if suffix == ".json":
        try:
            records = json.loads(path.read_text(encoding="utf-8-sig"))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON: {error.msg} at line {error.lineno}") from error
        if not isinstance(records, list) or not all(isinstance(record, dict) for record in records):
            raise ValueError(f"{path}: expected a JSON list of objects, one per item")
        return pd.DataFrame(records)
    if suffix == ".jsonl":
        return pd.read_json(path, lines=True)
    if suffix in (".csv", ".tsv"):
        return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",")
    if suffix == ".parquet":
        return pd.read_parquet(path)
    raise ValueError(f"{path}: an external table is one of {list(TABLE_SUFFIXES)}, not {suffix or 'a file without suffix'}")


@dataclass(frozen=True)
class JoinedTable:
    frame: Any  # DataFrame: the table's rows with ``example_id`` (medexp's) and ``external_id``
    unmatched: list[str]  # external ids naming no item of the benchmark read, in table order

    @property
    def n_matched(self) -> int:
        return int(self.frame["example_id"].notna().sum())


def join_table(table, scheme: IdScheme, known_ids: Iterable[str] | None = None,
               id_column: str = DEFAULT_ID_COLUMN, source: str = "the table") -> JoinedTable:
    """``table`` with its ids in medexp's scheme: column ``example_id`` (None where an id names no
    item of ``known_ids``, or of this benchmark when ``known_ids`` is None) and ``external_id``
    (the table's own). ``source`` names the table in errors."""
    if id_column not in table.columns:
        raise ValueError(f"{source}: no id column {id_column!r} (has {list(table.columns)})")
    known = set(known_ids) if known_ids is not None else None
    frame = table.rename(columns={id_column: "external_id"})
    if "example_id" in frame.columns:  # the table's own column of that name, kept apart from medexp's
        frame = frame.rename(columns={"example_id": "table_example_id"})
    internal = [scheme.internal(value) for value in frame["external_id"]]
    matched = [value if value is not None and (known is None or value in known) else None for value in internal]
    frame.insert(0, "example_id", matched)
    unmatched = [str(external) for external, value in zip(frame["external_id"], matched) if value is None]
    return JoinedTable(frame, unmatched)


def dotted_field(record: dict, path: str) -> Any:
    """``record[a][b]`` for ``a.b`` (None where a part is missing), as other tools nest their fields
    (lmms-eval's ``doc.qid``); a key spelled with the dots itself wins (a column named ``doc.qid``)."""
    if path in record:
        return record[path]
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


_IMAGE_PLACEHOLDER = re.compile(r"<image>", re.IGNORECASE)
# What harnesses append to a question, set aside when texts are compared (punctuation after it
# included): an option list for a closed question, as LLaVA-Med's evaluation data writes it ("Is
# there free air? Please choose from the following two options: [yes, no]", also "Please answer the
# question based on the image and choose from ..."), and lmms-eval's answer instruction (its
# post_prompt, kept in the prompt it logs as a sample's input).
_APPENDED = (
    re.compile(r"\s*(?:please\s+)?(?:answer\s+the\s+question\s+based\s+on\s+the\s+image\s+and\s+)?choose\s+from\s+"
               r"the\s+following(?:\s+\w+)?\s+options?\s*:\s*\[[^\[\]]*\]\s*[.?!]*\s*$", re.IGNORECASE),
    re.compile(r"\s*answer\s+the\s+question\s+using\s+a\s+single\s+word\s+or\s+phrase\s*[.!]?\s*$", re.IGNORECASE),
    re.compile(r"\s*请用一个词或短语回答问题。?\s*$"),
)


def normalized_question(text: Any) -> str:
    """A question as another harness may have written it, compared: whitespace runs as one space,
    ``<image>`` placeholders (LLaVA's prompts) and what harnesses append (:data:`_APPENDED`: an
    option list, an answer instruction) left out. Nothing else is changed: no guessing."""
    text = _IMAGE_PLACEHOLDER.sub(" ", str(text))
    for appended in _APPENDED:
        text = appended.sub("", text)
    return " ".join(text.split())


@dataclass(frozen=True)
class ItemLookup:
    """The items of a benchmark (``(example_id, question, position, upstream id)``; position None
    when unknown, upstream id None when the items do not carry the release's id) found by what
    another tool's record names them by (:class:`~medexp.config.schemas.ItemJoin`): an id in
    ``scheme`` (``external_id``), the release's own id (``source_id``: the example's meta
    :data:`~medexp.benchmarks.base.UPSTREAM_ID`, never a part of medexp's id), the released
    position, or the question text. :meth:`find` gives the example id, or None and why."""

    items: tuple[tuple[str, str, Optional[int], Any], ...]
    scheme: IdScheme

    @classmethod
    def of_examples(cls, examples: Iterable, scheme: IdScheme) -> "ItemLookup":
        """The lookup of benchmark examples, by their ids, questions, positions and upstream ids."""
        from medexp.benchmarks.base import UPSTREAM_ID

        return cls(tuple((example.example_id, example.question, example.position, example.meta.get(UPSTREAM_ID))
                         for example in examples), scheme)

    def __post_init__(self) -> None:
        by_source, by_position, by_question = {}, {}, {}
        for example_id, question, position, upstream in self.items:
            _, split, _ = _parts(example_id)
            if upstream is not None:
                by_source.setdefault((split, _id_text(upstream)), []).append(example_id)
            if position is not None:
                by_position[position] = example_id
            by_question.setdefault(normalized_question(question), []).append(example_id)
        object.__setattr__(self, "_ids", {example_id for example_id, *_ in self.items})
        object.__setattr__(self, "_splits", {_parts(example_id)[1] for example_id, *_ in self.items})
        object.__setattr__(self, "_by_source", by_source)
        object.__setattr__(self, "_by_position", by_position)
        object.__setattr__(self, "_by_question", by_question)

    def find(self, value: Any, join: str) -> tuple[Optional[str], Optional[str]]:
        """``(example_id, None)``, or ``(None, "unmatched")`` / ``(None, "ambiguous")``."""
        join = getattr(join, "value", join)
        if isinstance(value, float) and value.is_integer():  # an integer id read from a sheet beside an empty cell
            value = int(value)
        if join == "question":
            found = self._by_question.get(normalized_question(value), [])
            return (found[0], None) if len(found) == 1 else (None, "ambiguous" if found else "unmatched")
        if join == "external_id":
            example_id = self.scheme.internal(value)
            return (example_id, None) if example_id in self._ids else (None, "unmatched")
        if join == "source_id":
            # the split is the benchmark's (a record of one split); several splits: ambiguous by design
            found = [example_id for split in self._splits for example_id in self._by_source.get((split, _id_text(value)), [])]
            return (found[0], None) if len(found) == 1 else (None, "ambiguous" if found else "unmatched")
        if join == "position":
            try:
                example_id = self._by_position.get(int(value))
            except (TypeError, ValueError):
                example_id = None
            return (example_id, None) if example_id is not None else (None, "unmatched")
        raise ValueError(f"unknown join {join!r}; one of external_id, source_id, position, question")


def _id_text(value: Any) -> str:
    """An id as text, so a release's integer qid 10 and a record's "10" (or 10.0 from a sheet) agree."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()
