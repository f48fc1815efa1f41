"""Answers produced elsewhere (another harness, a hosted API run by hand) as a response table.

The file is JSONL: one object per line, blank lines ignored, UTF-8 with or without a byte-order
mark. Fields read:

- ``probe_id`` (required): the probe's ``probe_id``, or the id its release gave it when the probe
  records one in ``meta["release_probe_id"]`` (MedVIGIL's ``<case>__<kind>`` ids);
- the raw reply, under the first of ``model.reply_fields`` that the file uses (default
  ``response`` as medexp writes it, ``model_answer`` as MedVIGIL's harness does, ``prediction``
  as VLMEvalKit does, then ``answer``): kept as written, for the cell's judge to read as it
  reads every other answering mode's replies. The field is chosen once per file, so a line that
  lacks it is a bad line, never read from another field (VLMEvalKit's ``answer`` is the gold). When the raw reply is present an
  already-parsed letter is ignored (the other harness's parser may be the permissive one we do
  not repeat). A file with neither a reply field nor a letter field is refused, naming the
  fields it has;
- ``choice`` or ``model_letter`` (MedVIGIL): an already-parsed letter (or answer text for a
  free-text probe), used only when the reply is empty or absent; "" means none;
- ``status`` (default ``ok``), mapped explicitly (:data:`STATUS_WORDS`, plus
  ``model.status_map``): a reply (``ok``, ``unparsed``: the reply is judged), a refusal (an
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

Files other harnesses write (``model.responses_format``: ``openai_batch``, ``vlmevalkit``,
``lmms_eval``, ``llava_med``; ``jsonl``, alias ``medexp``, is the JSONL above) are read by their
format's module (:mod:`medexp.answers.formats`) into the same line records. A file answering a
probe set medexp exported names every probe by its id, every arm, and is checked against the
export's manifest (``model.responses_manifest``, else the format's ``manifest-<format>.json``
found beside the file or above it) and against the probe set its rows name: replies made for
another probe set are refused, naming both hashes. The import tells the format's reader whether
the replies answer an export (a manifest found) or are the harness's own file, and which files
the export wrote (never replies: a folder holding only them has not been answered). A harness's
own file (run on the release) answers the cell's *original* probes, joined by the release's id
or by question text; a line naming no example or several is a bad line, never guessed, and the
options or gold a line carries must be its probe's.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from medexp.answers.formats.base import PROBE_SET, REPLY, BadLine, BadLines, ExportFolder, Reading
from medexp.answers.table import ErrorCause, cause_of_message, error_row, response_row, response_table
from medexp.config.schemas.answers import AnswerMode, check_answer_config
from medexp.config.schemas.model import DEFAULT_REPLY_FIELDS, ItemJoin, ResponsesFormat
from medexp.kernel.hashing import directory_sha256, file_sha256
from medexp.probes.base import RELEASE_ID_KEY, SOURCE_RELEASE_ID_KEY

log = logging.getLogger("medexp")

_LETTER_FIELDS = ("choice", "model_letter")
ANSWERED = ("ok", "unparsed")
REFUSED = "refused"
# A harness's status word (lower case, stripped) -> what it means: an answer (ok, unparsed), a
# refusal, or the cause of an error (every ErrorCause's own name among them: a format's reader
# states the cause it read). ``model.status_map`` adds words or overrides these.
STATUS_WORDS: dict[str, str] = {
    **{cause.value: cause.value for cause in ErrorCause if cause is not ErrorCause.judge},
    **dict.fromkeys(("ok", "success", "succeeded", "completed", "complete", "done", "answered"), "ok"),
    "unparsed": "unparsed",
    **dict.fromkeys(("refused", "refusal", "content_filter", "blocked", "filtered"), REFUSED),
    **dict.fromkeys(("timeout", "timed_out", "timed out"), ErrorCause.timeout.value),
    **dict.fromkeys(("rate_limited", "rate_limit", "429"), ErrorCause.rate_limited.value),
    **dict.fromkeys(("connection_error", "connection"), ErrorCause.connection.value),
    **dict.fromkeys(("malformed", "invalid_response"), ErrorCause.malformed.value),
    **dict.fromkeys(("error", "failed", "failure", "exception"), ErrorCause.other.value),
}


def responses_digest(path: str | Path) -> str:
    """SHA-256 of the imported file's bytes, or of every file under an imported folder (it stands
    in for the model's weights in the cell's inputs)."""
    return directory_sha256(path) if Path(path).is_dir() else file_sha256(path)


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


def imported_probe_ids(path: str | Path, fmt: ResponsesFormat | str = ResponsesFormat.medexp,
                       probes: Sequence = ()) -> set[str]:
    """The probe ids the reply file ``path`` of format ``fmt`` names (for a harness's own file, the
    original ``probes`` its lines join); bad lines are left to :func:`import_responses`, which counts them."""
    from medexp.answers.formats import harness_format

    fmt = ResponsesFormat(fmt)
    reading = Reading(Path(path), list(probes), None, None, BadLines(Path(path)), export_folder(path, fmt))
    return {record["probe_id"] for _, _, record in harness_format(fmt.value).read(reading)}


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


def _imported_row(probe, record: dict, reading: _Reading, where: str
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
    # The reply as written; a harness's parsed letter only where the line holds no reply. What it
    # means is the cell's judge's to read, as for every other answering path.
    return response_row(probe, reply if reply is not None and reply.strip() else given or reply or ""), given


def import_responses(path: str | Path, probes: Sequence, answer_cfg, skipped_ids: Collection[str] = (),
                     set_aside_as: str = "answer probes this cell skipped (see its skipped table)",
                     reply_fields: Sequence[str] = DEFAULT_REPLY_FIELDS, status_map: Mapping[str, str] | None = None,
                     fmt: ResponsesFormat = ResponsesFormat.medexp, id_field: Optional[str] = None,
                     join: Optional[ItemJoin] = None, probe_set: Optional[str] = None,
                     manifest: Optional[Path] = None):
    """The response table of ``probes`` (one row per probe, in probe order) from the reply file
    ``path`` of format ``fmt`` (:mod:`medexp.answers.formats`); lines naming one of ``skipped_ids``
    (probes the cell could not make) are set aside, counted in a warning that says they
    ``set_aside_as``. ``reply_fields`` and ``status_map``: see the module docstring
    (``model.reply_fields``, ``model.status_map``; the reply fields apply to medexp's JSONL, the
    other formats' readers place the reply). A harness's own file joins the original probes by
    ``join`` over ``id_field`` (the format's defaults when None). ``probe_set``: the cell's probe-set
    hash; a row naming another probe set is refused. ``manifest``: the export's manifest the replies
    answer (None: the format's manifest beside the file or above it, if any)."""
    from medexp.answers.formats import harness_format
    from medexp.answers.formats.manifest import check_probe_set

    check_answer_config(answer_cfg)
    if AnswerMode(answer_cfg.mode) is not AnswerMode.generate:
        raise ValueError(f"answer.mode={AnswerMode(answer_cfg.mode).value}: imported responses are generated "
                         "answers; set answer.mode=generate")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no imported responses file at {path}")
    probes = list(probes)
    lookup = _probe_lookup(probes)
    skipped_ids = frozenset(skipped_ids)
    bad = BadLines(path)
    fmt = ResponsesFormat(fmt)
    records = list(harness_format(fmt.value).read(Reading(path, probes, id_field, join, bad,
                                                          export_folder(path, fmt, manifest))))
    if fmt not in PLAIN_JSONL:
        reply_fields = [REPLY]
    if not records and bad.lines:
        raise ValueError(f"{path}: no usable line, {len(bad.lines)} bad line(s) ({bad.counts()}); first: "
                         f"{'; '.join(map(str, bad.lines[:3]))}")
    if probe_set is not None:
        for _, where, record in records:
            if record.get(PROBE_SET) not in (None, ""):
                check_probe_set(probe_set, str(record[PROBE_SET]), where)
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
            row, given = _imported_row(probe, record, reading, where)
        except BadLine as problem:
            problem.number = number
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


PLAIN_JSONL = (ResponsesFormat.medexp, ResponsesFormat.jsonl)  # replies under model.reply_fields, statuses as written


def import_model_responses(probes: Sequence, model_cfg, answer_cfg, skipped_ids: Collection[str] = (),
                           cache_dir: str | Path | None = None):
    """The response table of ``probes`` from the file(s) of a ``responses`` model config. Replies
    to an export are checked first against its manifest (:func:`export_manifest`): the probe set's
    hash (computed with the digest cache under ``cache_dir``) and the answer settings that worded
    the requests must be the cell's."""
    from medexp.config.schemas import ModelFamily

    if ModelFamily(model_cfg.family) is not ModelFamily.responses:
        raise ValueError(f"model={model_cfg.name} has family {ModelFamily(model_cfg.family).value}; imported "
                         "responses need family responses")
    if not model_cfg.responses_path:
        raise ValueError(f"model={model_cfg.name}: set model.responses_path to the file of its responses")
    probes = list(probes)
    reading = {"reply_fields": list(model_cfg.get("reply_fields") or DEFAULT_REPLY_FIELDS),
               "status_map": dict(model_cfg.get("status_map") or {}),
               "fmt": ResponsesFormat(model_cfg.get("responses_format") or ResponsesFormat.medexp.value),
               "id_field": model_cfg.get("responses_id_field"), "join": model_cfg.get("responses_join")}
    manifest = export_manifest(model_cfg)
    if cache_dir is not None:
        from medexp.answers.cache import probe_set_hash

        reading["probe_set"] = probe_set_hash(probes, cache_dir)
        if manifest is not None:
            _check_export(manifest, reading["probe_set"], reading["fmt"], answer_cfg, probes)
    if reading["fmt"] is ResponsesFormat.openai_batch and manifest is None:
        raise ValueError(f"{model_cfg.responses_path}: a Batch output names its probes by custom_id only, so the "
                         "probe set it answers is checked against the export's manifest-openai_batch.json, and none "
                         "was found beside the file or above it; set "
                         "model.responses_manifest=<export folder>/manifest-openai_batch.json")
    if manifest is not None:
        reading["manifest"] = manifest[0]
    if not model_cfg.get("responses_no_image_path"):
        return import_responses(model_cfg.responses_path, probes, answer_cfg, skipped_ids, **reading)
    return _with_no_image_file(model_cfg.responses_path, model_cfg.responses_no_image_path, probes, answer_cfg,
                               skipped_ids, reading)


def export_manifest(model_cfg):
    """The manifest of the export a ``responses`` model's replies answer: ``model.responses_manifest``,
    else the format's found beside the reply file or above it; None for a harness's own file (no export)."""
    from medexp.answers.formats.manifest import read_manifest

    fmt = ResponsesFormat(model_cfg.get("responses_format") or ResponsesFormat.medexp)
    path = _manifest_path(model_cfg.responses_path, fmt, model_cfg.get("responses_manifest"))
    return (path, read_manifest(path)) if path is not None else None


def _manifest_path(replies: str | Path, fmt: ResponsesFormat, named: Optional[str | Path] = None) -> Optional[Path]:
    """``named``, else the format's manifest found beside the replies or above them (None: none)."""
    from medexp.answers.formats import harness_format
    from medexp.answers.formats.manifest import find_manifest

    return Path(named) if named else find_manifest(replies, harness_format(fmt.value).name)


def export_folder(replies: str | Path, fmt: ResponsesFormat, manifest: Optional[Path] = None) -> Optional[ExportFolder]:
    """The export the replies at ``replies`` answer (``manifest``, else the format's manifest found
    beside them or above), with the absolute paths of the files it wrote; None for a harness's own file."""
    from medexp.answers.formats.manifest import read_manifest

    path = _manifest_path(replies, fmt, manifest)
    if path is None:
        return None
    record = read_manifest(path)
    folder = Path(path).resolve().parent
    return ExportFolder(record, frozenset((folder / name).resolve() for name in record.files))


def _check_export(manifest, probe_set: str, fmt: ResponsesFormat, answer_cfg, probes: list) -> None:
    from medexp.answers.formats import harness_format
    from medexp.answers.formats.manifest import check_probe_set

    path, record = manifest
    check_probe_set(probe_set, record.probe_set, f"the export manifest {path}")
    if harness_format(record.format).name != harness_format(fmt.value).name:
        raise ValueError(f"{path}: the export was written as format={record.format}, and the replies are read as "
                         f"model.responses_format={fmt.value}")
    # the replies answer requests worded and decoded with the settings the format carries to the model
    differing = {key: (record.answer.get(key), answer_cfg.get(key)) for key in harness_format(fmt.value).carried(probes)
                 if record.answer.get(key) != answer_cfg.get(key)}
    if differing:
        details = "; ".join(f"detector.answer.{key}: export {was!r}, this cell {now!r}"
                            for key, (was, now) in differing.items())
        raise ValueError(f"{path}: the exported requests were worded or decoded with other answer settings than this "
                         f"cell's ({details}); import with the export's settings")


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
    others = imported_probe_ids(blind_path, reading["fmt"]) - {no_image_source(probe) for probe in blind}
    seeing = import_responses(path, [probe for probe in probes if probe.probe_id not in blind_ids], answer_cfg,
                              skipped_ids, **reading)
    unseeing = import_responses(blind_path, by_source, answer_cfg, {*skipped_ids, *others},
                                "answer other probes than the originals without the image (only theirs are used)",
                                **reading)
    ids = [probe.probe_id for probe in probes]
    table = pd.concat([seeing, unseeing], ignore_index=True).set_index("probe_id", drop=False).loc[ids]
    return as_response_table(table.reset_index(drop=True), ids)
