"""Answers produced elsewhere (another harness, a hosted API run by hand) as a response table.

The file is JSONL: one object per line, blank lines ignored. Fields read:

- ``probe_id`` (required): the probe's ``probe_id``, or the id its release gave it when the probe
  records one in ``meta["release_probe_id"]`` (MedVIGIL's ``<case>__<kind>`` ids);
- ``response`` or ``model_answer`` (MedVIGIL): the raw reply, judged by the same parser as every
  other answering mode. When the raw reply is present an already-parsed letter is ignored (the
  other harness's parser may be the permissive one we do not repeat);
- ``choice`` or ``model_letter`` (MedVIGIL): an already-parsed letter (or answer text for a
  free-text probe), used only when there is no raw reply; "" means none;
- ``status``: ``ok`` (default), ``unparsed``, ``error``, or a harness's own status. ``error``, or
  any status starting with "error" (MedVIGIL writes ``"error: <message>"``), makes an error row
  carrying ``error`` (or the status text). Another status with neither a reply nor a letter is an
  error row too;
- ``correct_letter`` (MedVIGIL), when present, must equal the probe's gold letter: a mismatch
  means the file answers another probe set or option order, and is refused.

MedVIGIL's matched no-image ablation is a second harness file (``<model>__mcq_noimg.jsonl``,
``model.responses_no_image_path``) whose lines carry the *original* probes' ids: they answer the
``no_image`` probes made from those originals (meta ``source_release_id``); its other lines (the
other kinds asked without the image) are set aside and counted.

Other fields (case_id, probe_kind, latency, usage, ...) are ignored. A probe without a line
becomes an ``error`` row ("no response imported for this probe"), so it stays in every
denominator; a line naming a probe outside the cell's probe set, or a probe already answered on
an earlier line, is refused with the file and line. Lines naming a probe the cell skipped
(``skipped_ids``: the harness answered MedVIGIL's credentialed chest X-ray cases, whose images
this copy lacks) are set aside and counted in a warning, not refused. :func:`responses_digest` is the file's
content hash for the response cache key.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from medexp.answers.parse import judge
from medexp.answers.table import Status, response_row, response_table
from medexp.benchmarks.digests import file_sha256
from medexp.config.schemas.answers import AnswerMode, check_answer_config
from medexp.probes.base import RELEASE_ID_KEY, SOURCE_RELEASE_ID_KEY, option_letters

log = logging.getLogger("medexp")

_REPLY_FIELDS = ("response", "model_answer")
_LETTER_FIELDS = ("choice", "model_letter")


def responses_digest(path: str | Path) -> str:
    """SHA-256 of the imported file's bytes (part of the response cache key)."""
    return file_sha256(path)


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


def _text_field(record: dict, names: tuple[str, ...], where: str) -> Optional[str]:
    for name in names:
        value = record.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"{where}: {name!r} must be a string or null, got {type(value).__name__} {value!r}")
        return value
    return None


def _imported_row(probe, record: dict, answer_cfg, where: str) -> tuple[dict[str, Any], Optional[str]]:
    """The response row of one imported record, and the letter the other harness had parsed."""
    reply = _text_field(record, _REPLY_FIELDS, where)
    given = (_text_field(record, _LETTER_FIELDS, where) or "").strip() or None
    status = _text_field(record, ("status",), where) or Status.ok.value
    error = _text_field(record, ("error",), where)
    gold_given = _text_field(record, ("correct_letter",), where)
    if probe.is_choice and gold_given and gold_given.strip().upper() != probe.gold:
        raise ValueError(f"{where}: correct_letter {gold_given!r} but probe {probe.probe_id} has gold {probe.gold!r}; "
                         "the file answers another probe set or option order")
    if status.strip().lower().startswith(Status.error.value):
        return response_row(probe, reply or "", None, Status.error, error=error or status), given
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
    if status.strip().lower() in (Status.ok.value, Status.unparsed.value):
        return response_row(probe, reply or "", None, Status.unparsed), given
    return response_row(probe, "", None, Status.error, error=error or f"imported status {status!r} with no response"), given


def imported_probe_ids(path: str | Path) -> set[str]:
    """The probe ids the JSONL ``path`` names (lines that are not objects with a string probe_id
    are left to :func:`import_responses`, which refuses them with their line)."""
    ids = set()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                record = json.loads(line) if line.strip() else None
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("probe_id"), str):
                ids.add(record["probe_id"])
    return ids


def import_responses(path: str | Path, probes: Sequence, answer_cfg, skipped_ids: Collection[str] = (),
                     set_aside_as: str = "answer probes this cell skipped (see its skipped table)"):
    """The response table of ``probes`` (one row per probe, in probe order) from the JSONL ``path``;
    lines naming one of ``skipped_ids`` (probes the cell could not make) are set aside, counted in
    a warning that says they ``set_aside_as``."""
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
    rows: dict[str, dict[str, Any]] = {}
    first_line: dict[str, int] = {}
    overruled = set_aside = 0
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{where}: not a JSON object ({error.msg} at column {error.colno})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
            key = record.get("probe_id")
            if not isinstance(key, str) or not key:
                raise ValueError(f"{where}: no probe_id (a non-empty string) in {sorted(record)}")
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
            row, given = _imported_row(probe, record, answer_cfg, where)
            rows[probe.probe_id] = row
            if given is not None and row["response"] != given and probe.is_choice and given.upper() != row["choice"]:
                overruled += 1
    if set_aside:
        log.warning("%s: %d line(s) %s; set aside", path, set_aside, set_aside_as)
    if overruled:
        log.warning("%s: on %d row(s) the strict parser read the raw reply differently from the letter the file "
                    "recorded; the parser's reading is used", path, overruled)
    missing = [probe for probe in probes if probe.probe_id not in rows]
    if missing:
        log.warning("%s: %d of %d probes have no imported response (error rows)", path, len(missing), len(probes))
    for probe in missing:
        rows[probe.probe_id] = response_row(probe, "", None, Status.error,
                                            error=f"no response imported for this probe (from {path})")
    ids = [probe.probe_id for probe in probes]
    return response_table([rows[probe_id] for probe_id in ids], ids)


def import_model_responses(probes: Sequence, model_cfg, answer_cfg, skipped_ids: Collection[str] = ()):
    """The response table of ``probes`` from the file(s) of a ``responses`` model config."""
    from medexp.config.schemas import ModelFamily

    if ModelFamily(model_cfg.family) is not ModelFamily.responses:
        raise ValueError(f"model={model_cfg.name} has family {ModelFamily(model_cfg.family).value}; imported "
                         "responses need family responses")
    if not model_cfg.responses_path:
        raise ValueError(f"model={model_cfg.name}: set model.responses_path to the JSONL file of its responses")
    if not model_cfg.get("responses_no_image_path"):
        return import_responses(model_cfg.responses_path, probes, answer_cfg, skipped_ids)
    return _with_no_image_file(model_cfg.responses_path, model_cfg.responses_no_image_path, list(probes), answer_cfg,
                               skipped_ids)


def no_image_source(probe) -> Optional[str]:
    """The release id a no-image harness file names ``probe`` by (its original's), or None."""
    return probe.meta.get(SOURCE_RELEASE_ID_KEY) if probe.kind == "no_image" else None


def _with_no_image_file(path, blind_path, probes: list, answer_cfg, skipped_ids: Collection[str]):
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
                              skipped_ids)
    unseeing = import_responses(blind_path, by_source, answer_cfg, {*skipped_ids, *others},
                                "answer other probes than the originals without the image (only theirs are used)")
    ids = [probe.probe_id for probe in probes]
    table = pd.concat([seeing, unseeing], ignore_index=True).set_index("probe_id", drop=False).loc[ids]
    return as_response_table(table.reset_index(drop=True), ids)
