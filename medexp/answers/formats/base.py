"""What every harness format shares: the export request, the reply records its reader yields,
bad lines, the images it writes, and how a harness's own file joins the cell's original probes.

A format writes a cell's probe set for a harness (:class:`Export`) and reads the harness's output
back into *reply records*: ``(line number, "<file>:<line>", record)`` where the record names its
probe (``probe_id``), holds the raw reply under :data:`REPLY` and optionally ``status`` (a status
word of :mod:`medexp.answers.imported`, an :class:`~medexp.answers.table.ErrorCause` value among
them), ``error`` (the message of an error) and :data:`PROBE_SET` (the probe set the row says it
answers). :mod:`medexp.answers.imported` turns records into response rows, the same for every format.

A file a format wrote names every probe by its probe id, whatever its arm; a harness's own file
(run on the release, not on an export) names items its own way, and each of its lines answers the
*original* probe of the example it names (:func:`join_originals`), by the release's id or by the
question text; a line naming no example or several is a bad line, never guessed.
"""

from __future__ import annotations

import bisect
import json
import logging
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

log = logging.getLogger("medexp")

REPLY = "response"  # the record field holding a harness line's raw reply
PROBE_SET = "probe_set"  # the field (column, doc key) of an exported row naming its probe set's hash
PROBE_ID = "probe_id"  # the field (column, doc key) of an exported row naming its probe
IMAGES = "images"  # the folder of an export holding the probes' images, by content
MANIFEST = "manifest-{format}.json"  # an export's manifest, one per format (medexp.answers.formats.manifest)
ORIGINAL_KINDS = ("original",)  # a harness run on the release asked each question as released

ReplyRecord = tuple[int, str, dict]


class BadLine(ValueError):
    """A line a reader skips (and counts): its message starts with the file and line; ``number``:
    its line (or row) number, which orders the count."""

    def __init__(self, where: str, reason: str, detail: str, number: int = 0):
        super().__init__(f"{where}: {reason}: {detail}")
        self.where, self.reason, self.number = where, reason, number


@dataclass
class BadLines:
    """The skipped lines of one imported file, by reason, in file order (the answering layer's own
    count; the benchmark loaders count their skipped rows through theirs)."""

    path: Path
    lines: list[BadLine] = field(default_factory=list)

    def add(self, line: BadLine) -> None:
        bisect.insort(self.lines, line, key=lambda bad: bad.number)  # after those of its number, as a stable sort puts it

    def counts(self) -> dict[str, int]:
        return dict(Counter(line.reason for line in self.lines))

    def log(self) -> None:
        if self.lines:
            log.warning("%s: %d bad line(s) skipped (%s); first: %s", self.path, len(self.lines),
                        ", ".join(f"{reason} {count}" for reason, count in self.counts().items()), self.lines[0])


@dataclass(frozen=True)
class Export:
    """What a format writes: the probes (in the cell's order), the answer settings that render
    them, the folder, a name for the dataset or task (``medexp_<bench>_<detector>_<hash>``), the
    probe set's content hash, and the model id a request names (OpenAI Batch)."""

    probes: Sequence
    answer_cfg: Any
    out: Path
    name: str
    probe_set: str
    model_id: str
    options: Mapping[str, Any] = field(default_factory=dict)  # the format's own options (format_options)


@dataclass(frozen=True)
class Reading:
    """What a reader is handed: the reply file (or a folder of them), the cell's probes, the id
    field and join a harness's own file is read with (None: the format's), the bad lines, and
    the export the replies answer, as the import found it (None: a harness's own file, run on
    the release): the readers do not guess it from the rows."""

    path: Path
    probes: Sequence
    id_field: Optional[str]
    join: Any  # ItemJoin or None
    bad: BadLines
    export: Optional["ExportFolder"] = None

    @property
    def exported(self) -> bool:
        return self.export is not None


@dataclass(frozen=True)
class ExportFolder:
    """An export the replies answer: its manifest and the files it wrote (absolute paths), which
    are never replies: a folder holding only them has no replies yet."""

    manifest: Any  # medexp.answers.formats.manifest.Manifest
    files: frozenset[Path]


WORDING = ("system_prompt", "choice_template", "option_line", "free_text_template")  # answer settings of the prompt text
DECODING = ("max_new_tokens", "temperature", "allow_sampling", "seed")  # answer settings of the decoding


@dataclass(frozen=True)
class HarnessFormat:
    """A format: its name, what it writes for the harness, what the harness gives back, its writer
    and reader, and which answer settings its files carry to the model (the wording of the prompt,
    the decoding): replies to an export answer requests made with those of its settings, so an
    importing cell must hold the same; the others the harness chooses itself."""

    name: str
    writes: str  # what the export holds, in words
    reply_file: str  # what model.responses_path names, in words
    write: Callable[[Export], list[Path]]
    read: Callable[[Reading], Iterator[ReplyRecord]]
    carries: tuple[str, ...] = WORDING
    options: Mapping[str, Any] = field(default_factory=dict)  # option -> default, given as format_options.<name>=
    # What the files carry for a probe set with probes showing other labels than A, B, ... (a
    # format that letters the options itself asks that set in medexp's rendering); None: ``carries``.
    carries_labelled: Optional[tuple[str, ...]] = None

    def carried(self, probes: Sequence) -> tuple[str, ...]:
        """The answer settings the files written for ``probes`` carry to the model."""
        if self.carries_labelled is not None and any(probe.labels is not None for probe in probes):
            return self.carries_labelled
        return self.carries


def json_lines(path: Path, bad: Optional[BadLines]) -> Iterator[ReplyRecord]:
    """``(line number, "<file>:<line>", object)`` of every JSON-object line (blank lines left
    out; a byte-order mark read as every reader reads it); the other lines go to ``bad``."""
    from medexp.benchmarks.records import LineProblem, json_object_lines

    for number, where, record in json_object_lines(path):
        if not isinstance(record, LineProblem):
            yield number, where, record
        elif bad is not None:
            bad.add(BadLine(where, record.reason, record.detail, number))


def named_lines(reading: Reading, name: str, paths: Optional[Sequence[Path]] = None) -> Iterator[ReplyRecord]:
    """Every JSON-object line of the reply file(s) (``paths``, else the ``*.jsonl`` under a folder)
    naming its probe by a non-empty string ``name``; the other lines go to ``reading.bad`` ("no <name>")."""
    for path in paths if paths is not None else reply_files(reading, "*.jsonl"):
        for number, where, line in json_lines(path, reading.bad):
            if not isinstance(line.get(name), str) or not line[name]:
                reading.bad.add(BadLine(where, f"no {name}", f"no non-empty string {name} in {sorted(line)}", number))
                continue
            yield number, where, line


def probe_line(probe, export: Export, image: Any) -> dict:
    """What a line (jsonl) or doc (lmms_eval) of an exported probe holds: its id and probe set, its
    kind, question and options (a list, or None for a free-text probe), the prompt the cell's
    answer settings render, ``image`` as the format writes it, and the gold."""
    from medexp.answers.prompt import render_prompt

    return {PROBE_ID: probe.probe_id, PROBE_SET: export.probe_set, "kind": probe.kind, "question": probe.question,
            "options": list(probe.options) if probe.options is not None else None,
            "prompt": render_prompt(probe, export.answer_cfg), "image": image, "gold": probe.gold}


def write_json_lines(path: Path, records: Iterable[dict]) -> Path:
    """``records`` as JSON lines (UTF-8, one object per line), written with :func:`write_text`."""
    return write_text(path, "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))


def write_text(path: Path, text: str) -> Path:
    """``text`` written atomically, readable by everyone (a harness may run as another user)."""
    from medexp.kernel.atomic import atomic_write_bytes

    atomic_write_bytes(path, text.encode("utf-8"))
    path.chmod(0o644)
    return path


def copy_images(probes: Sequence, out: Path) -> dict[str, str]:
    """Each distinct probe image copied into ``out/images/`` under its content hash (derived images
    included), as a path relative to ``out`` by probe id; probes without an image are left out.
    A copy is written beside its target and renamed onto it, so an interrupted export leaves no
    partial image; an image already there is kept only when its bytes are its name's hash (an
    export resumed over one an older writer cut short copies it again)."""
    from medexp.kernel.atomic import atomic_path
    from medexp.kernel.hashing import file_sha256

    folder = out / IMAGES
    folder.mkdir(parents=True, exist_ok=True)
    by_source: dict[Path, str] = {}
    names: dict[str, str] = {}
    for probe in probes:
        if probe.image is None:
            continue
        source = Path(probe.image)
        if source not in by_source:
            digest = file_sha256(source)
            target = folder / f"{digest}{source.suffix.lower()}"
            if not target.is_file() or file_sha256(target) != digest:
                with atomic_path(target) as partial:
                    shutil.copyfile(source, partial)
                    partial.chmod(0o644)
            by_source[source] = f"{IMAGES}/{target.name}"
        names[probe.probe_id] = by_source[source]
    return names


def image_files(root: Path, names: dict[str, str]) -> list[Path]:
    """The image files :func:`copy_images` wrote under ``root`` (each once, sorted): the export
    lists them with their SHA-256 in its manifest."""
    return [root / name for name in sorted(set(names.values()))]


def reply_files(reading: Reading, *patterns: str) -> list[Path]:
    """The reply file ``reading.path``, or the files under that folder matching one of ``patterns``
    (sorted, each once: a link to a file also found under its own name is left out), without the
    files the export wrote and its manifests; an error naming the folder when none is left, or when the file named
    is one the export wrote (its requests, its questions: not replies)."""
    path = reading.path
    written = reading.export.files if reading.export is not None else frozenset()
    if path.is_file():
        if path.resolve() in written:
            raise ValueError(f"{path} is a file the export wrote for the harness ({reading.export.manifest.format}), "
                             "not the harness's replies: run the harness on it and name its output")
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"no reply file or folder at {path}")
    found: dict[Path, Path] = {}
    for candidate in sorted(found_path for pattern in patterns for found_path in path.rglob(pattern)):
        real = candidate.resolve()
        if candidate.is_file() and real not in written and not candidate.match(MANIFEST.format(format="*")):
            found.setdefault(real, candidate)
    if not found:
        holds = " (only the export's own files: the harness has not answered it yet)" if written else ""
        raise FileNotFoundError(f"{path}: no reply file matching {' or '.join(patterns)} in this folder{holds}")
    return sorted(found.values())


def no_manifest(reading: Reading, where: str, sign: str) -> ValueError:
    """The error for replies that name an export (``sign``: how) when the import found no manifest
    of this format: without it they cannot be told from a harness's own file, nor checked."""
    return ValueError(f"{where}: {sign}, an export's, and no manifest of this format was found beside "
                      f"{reading.path} or above it; set "
                      "model.responses_manifest=<export folder>/manifest-<format>.json")


def reply_record(probe_id: Any, reply: Any, probe_set: Any = None, status: Optional[str] = None,
                 error: Optional[str] = None) -> dict:
    """The reply record naming ``probe_id`` (see the module docstring)."""
    record = {PROBE_ID: str(probe_id), REPLY: reply}
    if probe_set is not None:
        record[PROBE_SET] = str(probe_set)
    if status is not None:
        record["status"], record["error"] = status, error
    return record


def join_originals(reading: Reading, rows: Iterable[tuple[int, str, dict]], default: tuple[str, str],
                   reply_of: Callable[[dict], tuple[Any, Optional[str]]],
                   carried: Optional[Callable[[dict], "Carried"]] = None) -> Iterator[ReplyRecord]:
    """Reply records of a harness's own file: each row answers the original probe of the example
    it names by ``reading.id_field`` under ``reading.join`` (``default``: the format's field and
    join); ``reply_of(row)`` is its reply and the error it records instead. A row naming no
    example (``unmatched``), several (``ambiguous``), none at all (``no id``) or without a text
    reply (``no reply field``) is a bad line. ``carried(row)``: the options and gold the row itself
    holds, which must agree with its probe's (:func:`disagreement`): a file with any row that
    disagrees is refused, naming the first rows and the count (the release's option order or
    gold is not medexp's, and every reply would be judged against the wrong option)."""
    from medexp.benchmarks.external_ids import IdScheme, ItemLookup, dotted_field
    from medexp.config.schemas.model import ItemJoin

    id_field, join = reading.id_field or default[0], ItemJoin(reading.join or default[1])
    originals = [probe for probe in reading.probes if probe.kind in ORIGINAL_KINDS]
    if not originals:
        raise ValueError(f"{reading.path}: a harness's own file answers the questions as released, and this cell has "
                         f"no original probe (kinds: {sorted({probe.kind for probe in reading.probes})})")
    if join is ItemJoin.position:
        raise ValueError(f"{reading.path}: responses_join=position needs the released order, which a probe set does "
                         "not carry; join by source_id (the release's id) or question")
    name = originals[0].example_id.split("::", 1)[0]
    lookup = ItemLookup(tuple((probe.example_id, probe.question, None, upstream_id(probe)) for probe in originals),
                        IdScheme(name, name))
    by_example = {probe.example_id: probe for probe in originals}
    disagreeing: list[str] = []
    joined = 0
    for number, where, row in rows:
        identifier = dotted_field(row, id_field)
        if identifier is None or (isinstance(identifier, str) and not identifier.strip()):
            reading.bad.add(BadLine(where, "no id", f"no {id_field!r} in {sorted(row)}", number))
            continue
        example_id, reason = lookup.find(identifier, join)
        if example_id is None:
            what = "no" if reason == "unmatched" else "more than one"
            reading.bad.add(BadLine(where, reason, f"{id_field}={identifier!r} names {what} original probe of this "
                                                   f"cell (join={join.value})", number))
            continue
        reply, error = reply_of(row)
        if not isinstance(reply, str):
            reading.bad.add(BadLine(where, "no reply field", "no text reply in this line", number))
            continue
        probe = by_example[example_id]
        if carried is not None and (problem := disagreement(probe, carried(row))):
            disagreeing.append(f"{where}: {problem}")
        joined += 1
        status = ("error", error) if error is not None else (None, None)
        yield number, where, reply_record(probe.probe_id, reply, None, *status)
    if disagreeing:
        raise ValueError(f"{reading.path}: {len(disagreeing)} of {joined} joined rows carry other options or another "
                         f"gold than the cell's probe (the release's order or answers are not the ones medexp asks): "
                         f"{'; '.join(disagreeing[:3])}")


@dataclass(frozen=True)
class Carried:
    """The options (in the row's order; None: the row carries none) and the gold (a letter, an
    option's text or a free-text answer; None: none) a harness's own row holds."""

    options: Optional[list[str]] = None
    gold: Optional[str] = None


def disagreement(probe, carried: Carried) -> Optional[str]:
    """How the options or gold a row carries differ from its probe's (normalised), or None. A gold
    is the probe's gold letter or, for a choice probe, the text of its gold option. Texts compare as
    option texts do (:func:`medexp.benchmarks.options.normalise`: case and spacing aside), as a
    harness may have re-typed them."""
    from medexp.benchmarks.options import LETTERS, normalise

    if carried.options is not None and probe.options is not None:
        theirs, ours = [normalise(option) for option in carried.options], [normalise(o) for o in probe.options]
        if theirs != ours:
            return f"options {carried.options} and probe {probe.probe_id} has {list(probe.options)}"
    if carried.gold is not None and str(carried.gold).strip():
        accepted = {normalise(probe.gold)}
        if probe.options is not None and probe.gold in LETTERS[:len(probe.options)]:
            accepted.add(normalise(probe.options[LETTERS.index(probe.gold)]))
        if normalise(carried.gold) not in accepted:
            return f"gold {carried.gold!r} and probe {probe.probe_id} has gold {probe.gold!r}"
    return None


def upstream_id(probe) -> Any:
    """The release's id of the example a probe was made from (the example's meta upstream_id, which
    probes keep with the example's other scalar fields), or None."""
    from medexp.benchmarks.base import UPSTREAM_ID
    from medexp.probes.choice import EXAMPLE_META

    return probe.meta.get(EXAMPLE_META, {}).get(UPSTREAM_ID)


def by_probe_id(reading: Reading) -> dict[str, Any]:
    """The cell's probes by probe id."""
    return {probe.probe_id: probe for probe in reading.probes}
