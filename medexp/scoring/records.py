"""Per-example scores another run produced (model ``source: scores``), read as a score table.

A real model that cannot run here has often been scored already: the controlled audit published
each SLAKE-En question's teacher-forced mean log-probability for five VLMs, and lmms-eval's
``--log_samples`` writes one JSON line per item of a loglikelihood task. This module reads such a
file (the model config's ``scores:`` section, :class:`~medexp.config.schemas.ScoresFileConfig`)
into the columns :func:`medexp.scoring.example_scores` produces, so the detectors that read only
per-example scores (exch_rank, loss, overlap_gap) run on it unchanged. Formats:

- ``table``: one row per item with an id field and a score field: JSON lines, a JSON list of
  objects, CSV, TSV or parquet (told apart by suffix);
- ``audit_json``: the audit's ``{"models": [...], "records": [{"example_id": ..., "<score_field>":
  {"<model>": value, ...}, <other fields>}]}``; ``scores.model`` picks one model;
- ``lmms_eval``: ``samples_*.jsonl`` lines ``{"doc_id", "doc", "target", "arguments", "resps",
  "filtered_resps", ...}``; a loglikelihood task's ``filtered_resps`` is ``[[loglik, is_greedy]]``,
  the log-likelihood summed over the continuation's tokens (so ``score_kind: sum_logprob``).

Rows join the benchmark's examples by ``scores.join``: an id in the bench's ``external_ids``
scheme (:mod:`medexp.benchmarks.external_ids`), the upstream id alone, the released position, or
the question text.
A row is skipped and counted, with its file and line, when it has no id (``no_id``), is not valid
JSON (``bad_line``), names no example (``unmatched``) or several (``ambiguous``), shares its example with another row
(``duplicated``: every row of that example, since which one is right cannot be told) or has no
finite score (``nonfinite``). Fewer matched examples than ``scores.min_coverage`` of the benchmark
refuses the cell with the counts; joined by question text, a text several examples share is
``ambiguous``. Per-token values do not exist in such files: ``token_logprobs``
and ``token_minkpp_z`` are absent and ``n_answer_tokens`` is NaN, so a detector needing them
refuses the record before any work (``medexp.models.record_refusal``). The file's other scalar
fields (the audit's ``flagged`` and ``answer_type``; lmms-eval's ``doc`` fields as ``doc.<name>``)
travel as extra columns, for a detector that reads a flag from the record.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd

from medexp.benchmarks.base import Example
from medexp.kernel.hashing import file_sha256
from medexp.benchmarks.external_ids import IdScheme, ItemLookup, dotted_field
from medexp.config.schemas import ItemJoin, ScoreKind, ScoresFormat

log = logging.getLogger("medexp")

SCORE_COLUMNS = ("example_id", "position", "n_answer_tokens", "sum_logprob", "mean_logprob")
SKIP_REASONS = ("bad_line", "no_id", "unmatched", "ambiguous", "duplicated", "nonfinite")
_FIRST_SKIPS = 5  # skipped rows named in a refusal


def scores_digest(path: str | Path) -> str:
    """SHA-256 of the scores file's bytes: it stands in for the weights in the cell's inputs."""
    return file_sha256(path)


@dataclass
class RecordScores:
    """A score table read from a file, and what was skipped reading it."""

    table: pd.DataFrame  # SCORE_COLUMNS plus the file's other scalar fields, in the order of the examples
    path: str
    n_rows: int  # rows read from the file (bad lines included)
    n_examples: int  # examples of the benchmark the table had to cover
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason -> "<file>:<where>: <detail>"

    @property
    def n_matched(self) -> int:
        return len(self.table)

    def metrics(self, suffix: str = "") -> dict[str, float]:
        """``scores_n_rows``, ``scores_n_matched``, ``scores_n_missing`` and ``scores_n_skipped.<reason>``
        (``suffix``, e.g. ``.blip2``, tells apart the models of one cell)."""
        counts = {"scores_n_rows": self.n_rows, "scores_n_matched": self.n_matched,
                  "scores_n_missing": self.n_examples - self.n_matched,
                  **{f"scores_n_skipped.{reason}": len(rows) for reason, rows in self.skipped.items()}}
        return {f"{name}{suffix}": float(value) for name, value in counts.items()}


@dataclass(frozen=True)
class _Row:
    where: str
    identifier: Any
    score: Any
    extras: dict[str, Any]
    problem: str | None = None  # bad_line / no_id with its detail


def record_scores(scores_cfg, model_name: str, examples: Sequence[Example], bench_cfg) -> RecordScores:
    """The score table of ``examples`` (in their order) that the file of ``scores_cfg`` holds."""
    path = Path(str(scores_cfg.path)).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"model={model_name}: no scores file {path} (model.scores.path)")
    kind = ScoreKind(scores_cfg.score_kind)
    fmt = _format(scores_cfg, path)
    if fmt is ScoresFormat.lmms_eval and kind is not ScoreKind.sum_logprob:
        raise ValueError(f"model={model_name}: {path} is lmms-eval samples, whose loglikelihood is summed over the "
                         "answer's tokens: set model.scores.score_kind=sum_logprob")
    rows = list(_ROW_READERS[fmt](path, scores_cfg, model_name))
    return _joined(rows, path, kind, examples, bench_cfg, scores_cfg, model_name)


def _format(scores_cfg, path: Path) -> ScoresFormat:
    fmt = ScoresFormat(scores_cfg.format)
    if fmt is not ScoresFormat.auto:
        return fmt
    # lmms-eval names them samples_<task>.jsonl (newer versions <date>_samples_<task>.jsonl)
    if path.suffix.lower() == ".jsonl" and "samples_" in path.name:
        return ScoresFormat.lmms_eval
    if path.suffix.lower() == ".json":
        with path.open("rb") as handle:
            head = handle.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")  # a byte-order mark, then whitespace
        if head.startswith(b"{"):
            return ScoresFormat.audit_json
    return ScoresFormat.table


def _scalars(record: dict, skip: set[str], prefix: str = "") -> dict[str, Any]:
    return {f"{prefix}{key}": value for key, value in record.items()
            if key not in skip and (value is None or isinstance(value, (str, int, float, bool)))}


def _json_lines(path: Path) -> Iterator[tuple[str, dict | None, str | None]]:
    """``(where, object, problem)`` per non-blank line; a line that is no JSON object is a problem."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8").strip()
                if not text:
                    continue
                record = json.loads(text)
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                yield where, None, f"not a JSON line ({type(error).__name__})"
                continue
            if not isinstance(record, dict):
                yield where, None, f"a JSON {type(record).__name__}, not an object"
                continue
            yield where, record, None


def _table_rows(path: Path, scores_cfg, model_name: str) -> Iterator[_Row]:
    id_field, score_field = str(scores_cfg.id_field), str(scores_cfg.score_field)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        for where, record, problem in _json_lines(path):
            if record is None:
                yield _Row(where, None, None, {}, problem)
            else:
                yield _Row(where, dotted_field(record, id_field), dotted_field(record, score_field),
                           _scalars(record, {id_field, score_field}))
        return
    if suffix == ".json":
        try:
            records = json.loads(path.read_text(encoding="utf-8-sig"))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON: {error.msg} at line {error.lineno}") from error
        if not isinstance(records, list):
            raise ValueError(f"{path}: a table in JSON is a list of objects, one per item (format=audit_json reads "
                             "the audit's multi-model object)")
        for index, record in enumerate(records):
            where = f"{path}[{index}]"
            if not isinstance(record, dict):
                yield _Row(where, None, None, {}, f"a JSON {type(record).__name__}, not an object")
            else:
                yield _Row(where, dotted_field(record, id_field), dotted_field(record, score_field),
                           _scalars(record, {id_field, score_field}))
        return
    if suffix in (".csv", ".tsv"):
        frame, first_line = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ","), 2  # line 1 is the header
    elif suffix == ".parquet":
        frame, first_line = pd.read_parquet(path), 0
    else:
        raise ValueError(f"{path}: a scores table is .jsonl, .json, .csv, .tsv or .parquet, not {suffix or 'no suffix'}")
    for name in (id_field, score_field):
        if name not in frame.columns:
            raise ValueError(f"model={model_name}: {path} has no column {name!r} (has {list(frame.columns)}); set "
                             "model.scores.id_field / score_field")
    label = "line" if suffix != ".parquet" else "row"
    for offset, record in enumerate(frame.to_dict("records")):
        yield _Row(f"{path}:{label} {offset + first_line}", record[id_field], record[score_field],
                   _scalars(record, {id_field, score_field}))


def _audit_rows(path: Path, scores_cfg, model_name: str) -> Iterator[_Row]:
    try:
        document = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON: {error.msg} at line {error.lineno}") from error
    if not isinstance(document, dict) or not isinstance(document.get("records"), list):
        raise ValueError(f"{path}: the audit's multi-model JSON is an object with a `records` list")
    models = [str(name) for name in document.get("models") or []]
    chosen = scores_cfg.model
    if chosen is None or str(chosen) not in models:
        raise ValueError(f"model={model_name}: model.scores.model={chosen!r} is not one of the models of {path}: "
                         f"{models}")
    id_field, score_field = str(scores_cfg.id_field), str(scores_cfg.score_field)
    for index, record in enumerate(document["records"]):
        where = f"{path}: records[{index}]"
        if not isinstance(record, dict):
            yield _Row(where, None, None, {}, f"a JSON {type(record).__name__}, not an object")
            continue
        by_model = record.get(score_field)
        score = by_model.get(str(chosen)) if isinstance(by_model, dict) else None
        yield _Row(where, dotted_field(record, id_field), score, _scalars(record, {id_field, score_field}))


def _lmms_eval_rows(path: Path, scores_cfg, model_name: str) -> Iterator[_Row]:
    id_field = str(scores_cfg.id_field)
    for where, record, problem in _json_lines(path):
        if record is None:
            yield _Row(where, None, None, {}, problem)
            continue
        responses = record.get("filtered_resps")
        # one loglikelihood request per item: [[loglik, is_greedy]]; a multiple-choice item asks one
        # request per option, which is no gold-answer score
        if not (isinstance(responses, list) and len(responses) == 1):
            yield _Row(where, dotted_field(record, id_field), None, {})
            continue
        first = responses[0]
        score = first[0] if isinstance(first, list) and first else first
        doc = record.get("doc") if isinstance(record.get("doc"), dict) else {}
        yield _Row(where, dotted_field(record, id_field), score, _scalars(doc, set(), "doc."))


_ROW_READERS = {ScoresFormat.table: _table_rows, ScoresFormat.audit_json: _audit_rows,
                ScoresFormat.lmms_eval: _lmms_eval_rows}


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _joined(rows: list[_Row], path: Path, kind: ScoreKind, examples: Sequence[Example], bench_cfg, scores_cfg,
            model_name: str) -> RecordScores:
    lookup = ItemLookup.of_examples(examples, IdScheme.from_config(bench_cfg))
    by_id = {example.example_id: example for example in examples}
    join = ItemJoin(scores_cfg.join)
    skipped: dict[str, list[str]] = {}
    candidates: dict[str, list[tuple[_Row, float]]] = {}
    for row in rows:
        if row.problem is not None:
            skipped.setdefault("bad_line", []).append(f"{row.where}: {row.problem}")
            continue
        if row.identifier is None or (isinstance(row.identifier, float) and math.isnan(row.identifier)):
            skipped.setdefault("no_id", []).append(f"{row.where}: no {scores_cfg.id_field}")
            continue
        example_id, reason = lookup.find(row.identifier, join)
        if example_id is None:
            what = "no example" if reason == "unmatched" else "several examples"
            skipped.setdefault(reason, []).append(
                f"{row.where}: {scores_cfg.id_field}={row.identifier!r} names {what} of bench={bench_cfg.name} "
                f"(join={join.value})")
            continue
        example = by_id[example_id]
        score = _finite(row.score)
        if score is None:
            skipped.setdefault("nonfinite", []).append(f"{row.where}: score {row.score!r} is not a finite number")
            continue
        candidates.setdefault(example.example_id, []).append((row, score))
    chosen: dict[str, tuple[_Row, float]] = {}
    for example_id, found in candidates.items():
        if len(found) > 1:
            places = ", ".join(row.where for row, _ in found)
            skipped.setdefault("duplicated", []).extend(f"{row.where}: {example_id} also at {places}"
                                                        for row, _ in found)
        else:
            chosen[example_id] = found[0]
    records = []
    for example in examples:
        if example.example_id not in chosen:
            continue
        row, score = chosen[example.example_id]
        extras = {name: value for name, value in row.extras.items() if name not in SCORE_COLUMNS}
        records.append({"example_id": example.example_id, "position": example.position,
                        "n_answer_tokens": math.nan,
                        "sum_logprob": score if kind is ScoreKind.sum_logprob else math.nan,
                        "mean_logprob": score if kind is ScoreKind.mean_logprob else math.nan, **extras})
    table = pd.DataFrame(records, columns=None if records else list(SCORE_COLUMNS))
    result = RecordScores(table, str(path), len(rows), len(examples), skipped)
    if skipped:
        log.warning("model=%s: %s: skipped %s", model_name, path, {reason: len(items) for reason, items in skipped.items()})
    coverage = result.n_matched / max(len(examples), 1)
    if coverage < float(scores_cfg.min_coverage):
        first = [item for reason in SKIP_REASONS for item in skipped.get(reason, [])][:_FIRST_SKIPS]
        raise ValueError(
            f"model={model_name}: {path} scores {result.n_matched} of the {len(examples)} examples of "
            f"bench={bench_cfg.name} ({coverage:.1%} < model.scores.min_coverage={float(scores_cfg.min_coverage):g}); "
            f"{len(rows)} rows read, skipped {dict(Counter({r: len(i) for r, i in skipped.items()}))}"
            + (f"; first: {'; '.join(first)}" if first else ""))
    return result
