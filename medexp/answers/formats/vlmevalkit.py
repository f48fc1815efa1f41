"""VLMEvalKit: custom dataset TSVs out, its prediction sheets back.

Written: VLMEvalKit custom datasets, one TSV per kind of row VLMEvalKit's dataset classes tell
apart: ``<name>.tsv`` (image questions with options: ``CustomMCQDataset``), ``<name>_VQA.tsv``
(image questions without options: ``CustomVQADataset``), ``<name>_TEXT.tsv`` (text-only questions
with options, no ``image`` column: ``CustomTextMCQDataset``; VLMEvalKit's image datasets drop a
row without an image, ``skip_noimg``). Columns: ``index`` (the probe's place in the probe set, an
integer stable for the probe set), ``image`` (the image file base64-encoded; a later row of the
same image holds the first row's index instead, which VLMEvalKit resolves), ``question``,
``A``.. (the options in the probe's order), ``answer`` (the gold letter or text), ``category``
(the probe's kind), ``probe_id`` and ``probe_set``. Put the files in ``$LMUData`` and run
``python run.py --data <name> --model <model>``.

VLMEvalKit renders its own prompt (``Question: ...``, ``Options:`` and ``A. ...`` lines,
``Please select the correct answer from the options above.``), the same for every arm; medexp's
``answer`` templates are not used by it. It saves each image as a JPEG before the model sees it.

Read: the prediction sheet(s) (``<model>_<dataset>.xlsx``, ``.tsv`` or ``.csv``; a folder holding
several): the dataset's columns (without ``image``) and ``prediction``; a reply starting with
``Failed to obtain answer`` (VLMEvalKit's FAIL_MSG, written when the model raised) is an error row.
A sheet of an exported dataset names each row's probe by ``probe_id``, every arm; a sheet of
VLMEvalKit's own dataset (MMStar ...) joins the original probes by its ``index``, the release's id.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from medexp.answers.formats.base import (
    PROBE_ID, PROBE_SET, BadLine, Export, HarnessFormat, Reading, ReplyRecord, reply_record, join_originals, write_text,
)

FAILED = "Failed to obtain answer"  # VLMEvalKit's FAIL_MSG, its reply when the model raised
SHEETS = (".xlsx", ".tsv", ".csv")
OWN_ID = ("index", "source_id")  # a sheet of VLMEvalKit's own dataset: its index is the release's id
# The dataset files by (has an image, has options): VLMEvalKit picks a dataset class by their columns.
SUFFIXES = {(True, True): "", (True, False): "_VQA", (False, True): "_TEXT", (False, False): "_TEXT_VQA"}


def write(export: Export) -> list[Path]:
    import pandas as pd

    from medexp.benchmarks.options import LETTERS
    from medexp.kernel.hashing import file_sha256

    groups: dict[tuple[bool, bool], list[dict[str, Any]]] = {}
    # per file, an image's content -> the index of its first row there, which carries it
    first_row: dict[tuple[bool, bool], dict[str, int]] = {}
    digests: dict[Any, str] = {}  # image path -> its content hash (an image serves several probes)
    for index, probe in enumerate(export.probes):
        row: dict[str, Any] = {"index": index}
        group = (probe.image is not None, probe.is_choice)
        if probe.image is not None:
            if probe.image not in digests:
                digests[probe.image] = file_sha256(probe.image)
            digest = digests[probe.image]
            if digest in first_row.setdefault(group, {}):
                row["image"] = str(first_row[group][digest])
            else:
                first_row[group][digest] = index
                row["image"] = base64.b64encode(Path(probe.image).read_bytes()).decode("ascii")
        row["question"] = probe.question
        for letter, text in zip(LETTERS, probe.options or ()):
            row[letter] = text
        row.update({"answer": probe.gold, "category": probe.kind, PROBE_ID: probe.probe_id, PROBE_SET: export.probe_set})
        groups.setdefault(group, []).append(row)
    written = []
    for key, rows in sorted(groups.items(), reverse=True):
        path = export.out / f"{export.name}{SUFFIXES[key]}.tsv"
        write_text(path, pd.DataFrame(rows).to_csv(sep="\t", index=False))
        written.append(path)
    return written


def read(reading: Reading) -> Iterator[ReplyRecord]:
    for path in _sheets(reading.path):
        rows = list(_sheet_rows(path))
        if rows and PROBE_ID in rows[0][2]:
            for number, where, row in rows:
                reply, error = _reply(row)
                if not row.get(PROBE_ID):
                    reading.bad.add(BadLine(where, "no probe_id", "an exported dataset's row without its probe_id", number))
                    continue
                if not isinstance(reply, str):
                    reading.bad.add(BadLine(where, "no reply field", f"no prediction column in {sorted(row)}", number))
                    continue
                yield number, where, reply_record(row[PROBE_ID], reply, row.get(PROBE_SET) or None,
                                                  *(("error", error) if error else (None, None)))
        else:
            yield from join_originals(reading, rows, OWN_ID, _reply)


def _reply(row: dict) -> tuple[Any, str | None]:
    """A row's reply, and the error VLMEvalKit recorded instead (its FAIL_MSG)."""
    reply = row.get("prediction")
    if isinstance(reply, str) and reply.startswith(FAILED):
        return reply, reply
    return reply, None


def _sheets(path: Path) -> list[Path]:
    if path.is_dir():
        found = sorted(candidate for candidate in path.rglob("*") if candidate.suffix.lower() in SHEETS)
        if not found:
            raise FileNotFoundError(f"{path}: no prediction sheet ({', '.join(SHEETS)}) in this folder")
        return found
    if not path.is_file():
        raise FileNotFoundError(f"no prediction sheet or folder at {path}")
    return [path]


def _sheet_rows(path: Path) -> Iterator[tuple[int, str, dict]]:
    """The rows of a prediction sheet, every cell as text (an empty cell "")."""
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


FORMAT = HarnessFormat(
    name="vlmevalkit",
    writes="VLMEvalKit custom dataset TSVs (<name>.tsv with images and options; _VQA, _TEXT: the other kinds)",
    reply_file="VLMEvalKit's prediction sheet <model>_<dataset>.xlsx/.tsv/.csv, or the folder holding them",
    write=write,
    read=read,
    carries=(),
)
