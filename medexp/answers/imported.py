"""Answers produced elsewhere (another harness, a hosted API run by hand) as a response table.

The file is JSONL: one object per line, blank lines ignored, UTF-8 with or without a byte-order
mark. Fields read:

- ``probe_id`` (required): the probe's ``probe_id``, or the id its release gave it when the probe
  records one in ``meta["release_probe_id"]`` (MedVIGIL's ``<case>__<kind>`` ids);
- the raw reply, under the first of ``model.reply_fields`` that the file uses (default
  ``response`` as medexp writes it, ``model_answer`` as MedVIGIL's harness does, ``prediction``
  as VLMEvalKit does, then ``answer``): judged by the same parser as every other answering
  mode. The field is chosen once per file, so a line that lacks it is a bad line, never read
  from another field (VLMEvalKit's ``answer`` is the gold). When the raw reply is present an
  already-parsed letter is ignored (the other harness's parser may be the permissive one we do
  not repeat). A file with neither a reply field nor a letter field is refused, naming the
  fields it has;
- ``choice`` or ``model_letter`` (MedVIGIL): an already-parsed letter (or answer text for a
  free-text probe), used only when the reply is empty or absent; "" means none;
- ``status`` (default ``ok``), mapped explicitly (:data:`STATUS_WORDS`, plus
  ``model.status_map``): an answer (``ok``, ``unparsed``: the reply is judged), a refusal (an
  error row of cause ``refused`` keeping its text), or an error cause (an error row, whatever
  reply the line holds: ``failed`` with a reply is no answer). A status starting with
  ``error:`` (MedVIGIL writes ``"error: <message>"``) is an error whose cause is read from its
  message. An unknown status is a bad line;
- ``error``: the message of an error row;
- ``correct_letter`` (MedVIGIL), when present, must equal the probe's gold letter: a mismatch
  means the file answers another probe set or option order, and is refused.

MedVIGIL's matched no-image ablation is a second harness file (``<model>__mcq_noimg.jsonl``,
``model.responses_no_image_path``) whose lines carry the *original* probes' ids: they answer the
``no_image`` probes made from those originals (meta ``source_release_id``); its other lines (the
other kinds asked without the image) are set aside and counted.

Bad lines (not UTF-8, not JSON, not an object, no probe_id, a field of the wrong type, no reply
field, an unknown status) are skipped and counted by reason with their file and line
(:class:`ImportedBadLines`, logged); a bad line that names its probe makes that probe an error
row of cause ``malformed`` carrying the line's position. Other fields (case_id, probe_kind,
latency, usage, ...) are ignored. A probe without a line becomes an error row of cause
``not_imported``. A line naming a probe outside the cell's probe set, or a probe already
answered on an earlier line, is refused with the file and line: the file is not this cell's.
Lines naming a probe the cell skipped (``skipped_ids``: the harness answered MedVIGIL's
credentialed chest X-ray cases, whose images this copy lacks) are set aside and counted in a
warning. :func:`responses_digest` is the file's content hash for the response cache key.

Files other harnesses write in their own layout (``model.responses_format``) are read by
:func:`harness_records` into the same line records: lmms-eval's ``samples_*.jsonl`` of a
generation task (the reply is ``filtered_resps[0]``), VLMEvalKit's prediction sheet (.xlsx, .tsv
or .csv: the dataset's columns and ``prediction``; its ``Failed to obtain answer`` replies are
error rows) and LLaVA-Med's answer file (``question_id``, ``prompt``, ``text``). Such a file names
items its own way, so each line joins the cell's *original* probe of the example it names, by id
(``source_id``: VLMEvalKit's ``index``, LLaVA-Med's ``question_id``, a field inside lmms-eval's
``doc``) or by question text (lmms-eval's default: its ``doc_id`` indexes its own copy of the
data); a line naming no example (``unmatched``) or several (``ambiguous``: a question text two
examples share) is a bad line, counted with its file and line, never guessed.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from medexp.answers.parse import judge
from medexp.answers.table import ErrorCause, Status, error_row, response_row, response_table
from medexp.kernel.hashing import file_sha256
from medexp.config.schemas.answers import AnswerMode, check_answer_config
from medexp.benchmarks.external_ids import IdScheme, ItemLookup, dotted_field
from medexp.config.schemas.model import DEFAULT_REPLY_FIELDS, ItemJoin, ResponsesFormat
from medexp.probes.base import RELEASE_ID_KEY, SOURCE_RELEASE_ID_KEY, option_letters

log = logging.getLogger("medexp")

_LETTER_FIELDS = ("choice", "model_letter")
ANSWERED = ("ok", "unparsed")
REFUSED = "refused"
# A harness's status word (lower case, stripped) -> what it means: an answer (ok, unparsed), a
# refusal, or the cause of an error. ``model.status_map`` adds words or overrides these.
STATUS_WORDS: dict[str, str] = {
    **dict.fromkeys(("ok", "success", "succeeded", "completed", "complete", "done", "answered"), "ok"),
    "unparsed": "unparsed",
    **dict.fromkeys(("refused", "refusal", "content_filter", "blocked", "filtered"), REFUSED),
    **dict.fromkeys(("timeout", "timed_out", "timed out"), ErrorCause.timeout.value),
    **dict.fromkeys(("rate_limited", "rate_limit", "429"), ErrorCause.rate_limited.value),
    **dict.fromkeys(("connection_error", "connection"), ErrorCause.connection.value),
    **dict.fromkeys(("malformed", "invalid_response"), ErrorCause.malformed.value),
    **dict.fromkeys(("error", "failed", "failure", "exception"), ErrorCause.other.value),
}
# The cause of a harness's error message: the first pattern that matches.
_MESSAGE_CAUSES = (
    (re.compile(r"time[ds]?[ _-]?out", re.I), ErrorCause.timeout),
    (re.compile(r"\b429\b|rate[ _-]?limit", re.I), ErrorCause.rate_limited),
    (re.compile(r"\b5\d\d\b"), ErrorCause.http_5xx),
    (re.compile(r"\b4\d\d\b"), ErrorCause.http_4xx),
    (re.compile(r"connect", re.I), ErrorCause.connection),
    (re.compile(r"content[ _-]?filter|refus", re.I), ErrorCause.refused),
)


def responses_digest(path: str | Path) -> str:
    """SHA-256 of the imported file's bytes (part of the response cache key)."""
    return file_sha256(path)


class BadLine(ValueError):
    """A line this reader skips (and counts): its message starts with the file and line."""

    def __init__(self, where: str, reason: str, detail: str):
        super().__init__(f"{where}: {reason}: {detail}")
        self.where, self.reason = where, reason


@dataclass
class ImportedBadLines:
    """The skipped lines of one imported file, by reason (kept within the answering layer; the
    benchmark loaders count their skipped rows through their own mechanism)."""

    path: Path
    lines: list[BadLine] = field(default_factory=list)

    def add(self, line: BadLine) -> None:
        self.lines.append(line)

    def counts(self) -> dict[str, int]:
        return dict(Counter(line.reason for line in self.lines))

    def log(self) -> None:
        if self.lines:
            log.warning("%s: %d bad line(s) skipped (%s); first: %s", self.path, len(self.lines),
                        ", ".join(f"{reason} {count}" for reason, count in self.counts().items()), self.lines[0])


def cause_of_message(text: str) -> ErrorCause:
    """The cause a harness's error message names (timeout, HTTP 503, ...), else ``other``."""
    return next((cause for pattern, cause in _MESSAGE_CAUSES if pattern.search(text)), ErrorCause.other)


def status_meaning(status: str, status_map: Mapping[str, str], where: str) -> tuple[str, Optional[str]]:
    """What a line's status means (``ok``, ``unparsed``, ``refused`` or an error cause), and the
    harness's error message when the status carries one (``error: <message>``)."""
    word = status.strip().lower()
    words = {**STATUS_WORDS, **{str(key).strip().lower(): str(value) for key, value in status_map.items()}}
    if word in words:
        return words[word], None
    head, colon, message = status.partition(":")
    if colon and head.strip().lower() in ("error", "failed", "failure"):
        return cause_of_message(message).value, message.strip() or status
    raise BadLine(where, "unknown status", f"{status!r}; known: {sorted(words)} (add it to model.status_map)")


def _records(path: Path, bad: Optional[ImportedBadLines] = None,
             named: bool = True) -> Iterator[tuple[int, str, dict]]:
    """``(line number, "<file>:<line>", record)`` of every usable JSON-object line; the others are
    added to ``bad`` (or left out, without ``bad``). ``named``: a line must name its probe_id."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            try:
                record = _line_record(raw, number, where, named)
            except BadLine as problem:
                if bad is not None:
                    bad.add(problem)
                continue
            if record is not None:
                yield number, where, record


def _line_record(raw: bytes, number: int, where: str, named: bool = True) -> Optional[dict]:
    """The JSON object of one line (None for a blank line); :class:`BadLine` otherwise."""
    try:
        line = raw.decode("utf-8-sig" if number == 1 else "utf-8")  # a byte-order mark, as every reader accepts
    except UnicodeDecodeError as error:
        raise BadLine(where, "not UTF-8", f"{error.reason} at byte {error.start}") from None
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise BadLine(where, "not JSON", f"{error.msg} at column {error.colno}") from None
    if not isinstance(record, dict):
        raise BadLine(where, "not a JSON object", f"a JSON {type(record).__name__}")
    if named and (not isinstance(record.get("probe_id"), str) or not record["probe_id"]):
        raise BadLine(where, "no probe_id", f"no non-empty string probe_id in {sorted(record)}")
    return record


def imported_probe_ids(path: str | Path) -> set[str]:
    """The probe ids the JSONL ``path`` names (bad lines are left to :func:`import_responses`,
    which counts them)."""
    return {record["probe_id"] for _, _, record in _records(Path(path))}


def _probe_lookup(probes: Sequence) -> dict[str, Any]:
    lookup: dict[str, Any] = {}
    for probe in probes:
        keys = {probe.probe_id, probe.meta.get(RELEASE_ID_KEY, probe.probe_id)}
        for key in keys:
            if key in lookup and lookup[key] is not probe:
                raise ValueError(f"two probes answer to the id {key!r} ({lookup[key].probe_id} and {probe.probe_id}); "
                                 f"probe ids and meta[{RELEASE_ID_KEY!r}] must be unique across the probe set")
            lookup[key] = probe
    return lookup


def _text_field(record: dict, name: Optional[str], where: str) -> Optional[str]:
    value = record.get(name) if name is not None else None
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # a harness that wrote a numeric answer
    raise BadLine(where, "wrong field type", f"{name!r} must be a string or null, got a JSON {type(value).__name__}")


def reply_field(records: Sequence[dict], reply_fields: Sequence[str], path: Path) -> Optional[str]:
    """The file's reply field: the first of ``reply_fields`` any line has; None when the file
    has only parsed letters; an error naming the fields when it has neither."""
    seen = set().union(*(record.keys() for record in records)) if records else set()
    chosen = next((name for name in reply_fields if name in seen), None)
    if chosen is None and records and not seen & set(_LETTER_FIELDS):
        raise ValueError(f"{path}: no reply field: its lines have {sorted(seen)}, none of model.reply_fields "
                         f"{list(reply_fields)} nor a parsed letter ({list(_LETTER_FIELDS)}); set "
                         "model.reply_fields=[<the field holding the replies>]")
    return chosen


@dataclass(frozen=True)
class _Reading:
    """How a file is read: its reply field and the status words."""

    reply: Optional[str]
    status_map: Mapping[str, str]


def _imported_row(probe, record: dict, answer_cfg, reading: _Reading, where: str
                  ) -> tuple[dict[str, Any], Optional[str]]:
    """The response row of one imported record, and the letter the other harness had parsed."""
    if reading.reply is not None and reading.reply not in record and not any(name in record for name in _LETTER_FIELDS):
        raise BadLine(where, "no reply field", f"the file's replies are under {reading.reply!r}, this line has "
                                               f"{sorted(record)}")
    reply = _text_field(record, reading.reply, where)
    given = next((value for name in _LETTER_FIELDS if (value := _text_field(record, name, where))), None)
    given = (given or "").strip() or None
    status = _text_field(record, "status", where) or "ok"
    error = _text_field(record, "error", where)
    gold_given = _text_field(record, "correct_letter", where)
    if probe.is_choice and gold_given and gold_given.strip().upper() != probe.gold:
        raise ValueError(f"{where}: correct_letter {gold_given!r} but probe {probe.probe_id} has gold {probe.gold!r}; "
                         "the file answers another probe set or option order")
    meaning, message = status_meaning(status, reading.status_map, where)
    if meaning not in ANSWERED:
        detail = error or message or f"the harness recorded status {status!r}"
        cause = cause_of_message(detail) if meaning == ErrorCause.other.value else ErrorCause(meaning)
        return error_row(probe, cause, f"{where}: {detail}", reply or given or ""), given
    if reply is not None and reply.strip():
        choice, judged = judge(probe, reply, answer_cfg)
        return response_row(probe, reply, choice, judged), given
    if given is not None:
        if probe.is_choice:
            letter = given.upper()
            if letter in option_letters(len(probe.options)):
                return response_row(probe, given, letter, Status.ok), given
            return response_row(probe, given, None, Status.unparsed), given
        choice, judged = judge(probe, given, answer_cfg)
        return response_row(probe, given, choice, judged), given
    return response_row(probe, reply or "", None, Status.unparsed), given


def import_responses(path: str | Path, probes: Sequence, answer_cfg, skipped_ids: Collection[str] = (),
                     set_aside_as: str = "answer probes this cell skipped (see its skipped table)",
                     reply_fields: Sequence[str] = DEFAULT_REPLY_FIELDS, status_map: Mapping[str, str] | None = None,
                     fmt: ResponsesFormat = ResponsesFormat.medexp, id_field: Optional[str] = None,
                     join: Optional[ItemJoin] = None):
    """The response table of ``probes`` (one row per probe, in probe order) from the JSONL ``path``;
    lines naming one of ``skipped_ids`` (probes the cell could not make) are set aside, counted in
    a warning that says they ``set_aside_as``. ``reply_fields`` and ``status_map``: see the
    module docstring (``model.reply_fields``, ``model.status_map``). ``fmt``: a harness's own
    file (:func:`harness_records`), its lines joined to the original probes by ``join`` over
    ``id_field`` (the format's defaults when None)."""
    check_answer_config(answer_cfg)
    if AnswerMode(answer_cfg.mode) is not AnswerMode.generate:
        raise ValueError(f"answer.mode={AnswerMode(answer_cfg.mode).value}: imported responses are generated "
                         "answers; set answer.mode=generate")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no imported responses file at {path}")
    probes = list(probes)
    lookup = _probe_lookup(probes)
    skipped_ids = frozenset(skipped_ids)
    bad = ImportedBadLines(path)
    fmt = ResponsesFormat(fmt)
    if fmt is ResponsesFormat.medexp:
        records = list(_records(path, bad))
    else:
        records = list(harness_records(path, fmt, probes, id_field, join, bad))
        reply_fields = [HARNESS_REPLY]
    if not records and bad.lines:
        raise ValueError(f"{path}: no usable line, {len(bad.lines)} bad line(s) ({bad.counts()}); first: "
                         f"{'; '.join(map(str, bad.lines[:3]))}")
    reading = _Reading(reply_field([record for _, _, record in records], reply_fields, path), dict(status_map or {}))
    rows: dict[str, dict[str, Any]] = {}
    first_line: dict[str, int] = {}
    overruled = set_aside = 0
    for number, where, record in records:
        key = record["probe_id"]
        probe = lookup.get(key)
        if probe is None and key in skipped_ids:
            set_aside += 1
            continue
        if probe is None:
            examples = [probe.probe_id for probe in probes[:3]]
            raise ValueError(f"{where}: probe_id {key!r} is not in this cell's probe set "
                             f"({len(probes)} probes, e.g. {examples})")
        if probe.probe_id in first_line:
            raise ValueError(f"{where}: probe {key!r} is answered twice (first on line {first_line[probe.probe_id]})")
        first_line[probe.probe_id] = number
        try:
            row, given = _imported_row(probe, record, answer_cfg, reading, where)
        except BadLine as problem:
            bad.add(problem)
            rows[probe.probe_id] = error_row(probe, ErrorCause.malformed, str(problem))
            continue
        rows[probe.probe_id] = row
        if given is not None and row["response"] != given and probe.is_choice and given.upper() != row["choice"]:
            overruled += 1
    bad.log()
    if set_aside:
        log.warning("%s: %d line(s) %s; set aside", path, set_aside, set_aside_as)
    if overruled:
        log.warning("%s: on %d row(s) the strict parser read the raw reply differently from the letter the file "
                    "recorded; the parser's reading is used", path, overruled)
    missing = [probe for probe in probes if probe.probe_id not in rows]
    if missing:
        log.warning("%s: %d of %d probes have no imported response (error rows)", path, len(missing), len(probes))
    for probe in missing:
        rows[probe.probe_id] = error_row(probe, ErrorCause.not_imported,
                                         f"no response imported for this probe (from {path})")
    ids = [probe.probe_id for probe in probes]
    return response_table([rows[probe_id] for probe_id in ids], ids)


# Replies another harness wrote, in its own layout: the field naming the item and how it joins
# the cell's original probes (model.responses_id_field / responses_join override both).
HARNESS_JOINS = {
    ResponsesFormat.lmms_eval: ("doc.question", ItemJoin.question),  # doc_id indexes lmms-eval's copy, not ours
    ResponsesFormat.vlmevalkit: ("index", ItemJoin.source_id),  # the dataset TSV's index, as the loader's ids
    ResponsesFormat.llava_med: ("question_id", ItemJoin.source_id),
}
HARNESS_REPLY = "response"  # the field a harness line's reply is put under for the common reader
ORIGINAL_KINDS = ("original",)  # a harness asked each question as released: it answers those probes
VLMEVALKIT_FAILED = "Failed to obtain answer"  # VLMEvalKit's FAIL_MSG, its reply when the model raised


def _lmms_eval_reply(record: dict) -> Any:
    """A generation task's reply: ``filtered_resps[0]`` (after the task's filters), else ``resps[0][0]``."""
    for name in ("filtered_resps", "resps"):
        value = record.get(name)
        while isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str):
            return value
    return None


def _sheet_rows(path: Path) -> Iterator[tuple[int, str, dict]]:
    """The rows of a VLMEvalKit prediction sheet, every cell as text (an empty cell "")."""
    import pandas as pd

    suffix = path.suffix.lower()
    if suffix == ".xlsx":
        try:
            frame = pd.read_excel(path, dtype=str, keep_default_na=False)
        except ImportError as error:
            raise ValueError(f"{path}: reading an .xlsx sheet needs openpyxl (pip install openpyxl), or save the "
                             "sheet as .tsv") from error
    elif suffix in (".tsv", ".csv"):
        frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype=str, keep_default_na=False)
    else:
        raise ValueError(f"{path}: a VLMEvalKit prediction sheet is .xlsx, .tsv or .csv, not {suffix or 'no suffix'}")
    for offset, record in enumerate(frame.to_dict("records")):
        yield offset + 1, f"{path}: row {offset + 1}", record


def _harness_reply(fmt: ResponsesFormat, record: dict) -> tuple[Any, Optional[str]]:
    """The reply of one harness line, and the error it records instead (VLMEvalKit's FAIL_MSG)."""
    if fmt is ResponsesFormat.lmms_eval:
        return _lmms_eval_reply(record), None
    if fmt is ResponsesFormat.llava_med:
        return record.get("text"), None
    reply = record.get("prediction")
    if isinstance(reply, str) and reply.startswith(VLMEVALKIT_FAILED):
        return reply, reply
    return reply, None


def harness_records(path: Path, fmt: ResponsesFormat, probes: Sequence, id_field: Optional[str],
                    join: Optional[ItemJoin], bad: ImportedBadLines) -> Iterator[tuple[int, str, dict]]:
    """medexp's line records (``probe_id``, ``response``, ``status``, ``error``) from a harness's
    own file: lmms-eval samples of a generation task, a VLMEvalKit prediction sheet, a LLaVA-Med
    answer file. Each line joins the original probe (the question as released) of the example it
    names, by id or by question text; a line naming no example (``unmatched``), several
    (``ambiguous``: a question text two examples share), none at all (``no id``) or without a text
    reply (``no reply field``) is a bad line, counted with its file and line. Nothing is guessed."""
    default_field, default_join = HARNESS_JOINS[fmt]
    id_field, join = id_field or default_field, ItemJoin(join or default_join)
    originals = [probe for probe in probes if probe.kind in ORIGINAL_KINDS]
    if not originals:
        raise ValueError(f"{path}: a {fmt.value} file answers the questions as released, and this cell has no "
                         f"original probe (kinds: {sorted({probe.kind for probe in probes})})")
    if join is ItemJoin.position:
        raise ValueError(f"{path}: responses_join=position needs the released order, which a probe set does not "
                         "carry; join by source_id (an upstream id field) or question")
    name = originals[0].example_id.split("::", 1)[0]
    lookup = ItemLookup(tuple((probe.example_id, probe.question, None) for probe in originals), IdScheme(name, name))
    by_example = {probe.example_id: probe for probe in originals}
    rows = _sheet_rows(path) if fmt is ResponsesFormat.vlmevalkit else _records(path, bad, named=False)
    for number, where, record in rows:
        identifier = dotted_field(record, id_field)
        if identifier is None or (isinstance(identifier, str) and not identifier.strip()):
            bad.add(BadLine(where, "no id", f"no {id_field!r} in {sorted(record)}"))
            continue
        example_id, reason = lookup.find(identifier, join)
        if example_id is None:
            what = "no" if reason == "unmatched" else "more than one"
            bad.add(BadLine(where, reason, f"{id_field}={identifier!r} names {what} original probe of this cell "
                                           f"(join={join.value})"))
            continue
        reply, error = _harness_reply(fmt, record)
        if not isinstance(reply, str):
            bad.add(BadLine(where, "no reply field", f"no text reply in this {fmt.value} line"))
            continue
        line = {"probe_id": by_example[example_id].probe_id, HARNESS_REPLY: reply}
        if error is not None:
            line.update(status="error", error=error)
        yield number, where, line


def import_model_responses(probes: Sequence, model_cfg, answer_cfg, skipped_ids: Collection[str] = ()):
    """The response table of ``probes`` from the file(s) of a ``responses`` model config."""
    from medexp.config.schemas import ModelFamily

    if ModelFamily(model_cfg.family) is not ModelFamily.responses:
        raise ValueError(f"model={model_cfg.name} has family {ModelFamily(model_cfg.family).value}; imported "
                         "responses need family responses")
    if not model_cfg.responses_path:
        raise ValueError(f"model={model_cfg.name}: set model.responses_path to the JSONL file of its responses")
    reading = {"reply_fields": list(model_cfg.get("reply_fields") or DEFAULT_REPLY_FIELDS),
               "status_map": dict(model_cfg.get("status_map") or {}),
               "fmt": ResponsesFormat(model_cfg.get("responses_format") or ResponsesFormat.medexp.value),
               "id_field": model_cfg.get("responses_id_field"), "join": model_cfg.get("responses_join")}
    if not model_cfg.get("responses_no_image_path"):
        return import_responses(model_cfg.responses_path, probes, answer_cfg, skipped_ids, **reading)
    return _with_no_image_file(model_cfg.responses_path, model_cfg.responses_no_image_path, list(probes), answer_cfg,
                               skipped_ids, reading)


def no_image_source(probe) -> Optional[str]:
    """The release id a no-image harness file names ``probe`` by (its original's), or None."""
    return probe.meta.get(SOURCE_RELEASE_ID_KEY) if probe.kind == "no_image" else None


def _with_no_image_file(path, blind_path, probes: list, answer_cfg, skipped_ids: Collection[str], reading: dict):
    """The no_image probes answered from the no-image file by their originals' ids, every other
    probe from ``path`` (see the module docstring)."""
    import pandas as pd

    from medexp.answers.table import as_response_table

    blind = [probe for probe in probes if no_image_source(probe)]
    if not blind:
        raise ValueError(f"model.responses_no_image_path={blind_path}: the cell has no no_image probe made from a "
                         "release's original probe (bench=medvigil with no_image in detector.kinds)")
    blind_ids = {probe.probe_id for probe in blind}
    by_source = [replace(probe, meta={**probe.meta, RELEASE_ID_KEY: no_image_source(probe)}) for probe in blind]
    others = imported_probe_ids(blind_path) - {no_image_source(probe) for probe in blind}
    seeing = import_responses(path, [probe for probe in probes if probe.probe_id not in blind_ids], answer_cfg,
                              skipped_ids, **reading)
    unseeing = import_responses(blind_path, by_source, answer_cfg, {*skipped_ids, *others},
                                "answer other probes than the originals without the image (only theirs are used)",
                                **reading)
    ids = [probe.probe_id for probe in probes]
    table = pd.concat([seeing, unseeing], ignore_index=True).set_index("probe_id", drop=False).loc[ids]
    return as_response_table(table.reset_index(drop=True), ids)
