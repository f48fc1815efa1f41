"""VLMEvalKit: custom dataset TSVs out, its prediction sheets back.

Written: VLMEvalKit custom datasets, one TSV per kind of row VLMEvalKit tells apart. Its
``build_dataset`` picks a custom dataset's class by the columns (``A`` and ``B``: multiple choice;
an ``image`` column: an image dataset), and ``DATASET_TYPE`` (which chooses the prompt and the
evaluation) by the *name*: a custom dataset is open-ended (``VQA``) only when its name contains
``openended``, else multiple choice. So: ``<name>.tsv`` (image questions with options:
``CustomMCQDataset``), ``<name>_openended.tsv`` (image questions without options:
``CustomVQADataset``, type VQA), ``<name>_TEXT.tsv`` (text-only questions with options, no ``image``
column: ``CustomTextMCQDataset``; VLMEvalKit's image datasets drop a row without an image,
``skip_noimg``). VLMEvalKit has no custom dataset for a free-text question without an image: a
probe set holding such probes is refused for this format. Columns: ``index`` (the probe's place in the probe set, an
integer stable for the probe set), ``image`` (the image file base64-encoded; a later row of the
same image holds the first row's index instead, which VLMEvalKit resolves), ``question``,
``A``.. (the options in the probe's order), ``answer`` (the gold letter or text), ``category``
(the probe's kind), ``probe_id`` and ``probe_set``. Put the files in ``$LMUData`` and run
``python run.py --data <name> --model <model>``.

VLMEvalKit renders its own prompt (``Question: ...``, ``Options:`` and ``A. ...`` lines,
``Please select the correct answer from the options above.``), the same for every arm; medexp's
``answer`` templates are not used by it. It saves each image as a JPEG before the model sees it.
Its multiple-choice prompt letters the option columns itself, so it cannot show other labels
(renumbered_options' 1, 2, 3): a probe set holding a probe with its own labels is written with
every multiple-choice probe in the open-ended dataset (``CustomVQADataset``, whose prompt is the
image and the ``question`` cell as it stands), its ``question`` the prompt medexp renders (the
options under the labels the probe shows, the cell's ``answer`` wording), so both arms are worded
alike and such an export carries the wording settings (an importing cell must hold them).

Read: the prediction sheet(s) (``<model>_<dataset>.xlsx``, VLMEvalKit's default, ``.tsv`` or
``.csv``): the dataset's columns (without ``image``) and ``prediction``; a reply starting with
``Failed to obtain answer`` (VLMEvalKit's FAIL_MSG, written when the model raised) is an error row.
Given its output folder (``outputs/<model>/``: a folder per run, ``T<date>_G<commit>/``, and links to
the latest run's files beside them), each file is read once (a link to a file also found is left
out) and only prediction sheets: a sheet named as another plus ``_<suffix>`` is VLMEvalKit's
evaluation of it (``_acc.csv``, ``_<judge>_result.xlsx``, ``_score.csv``) and is left out. A sheet
of an exported dataset names each row's probe by ``probe_id``, every arm; a sheet of VLMEvalKit's
own dataset (MMStar ...) joins the original probes by its ``index``, the release's id, and its
options (``A``..) and ``answer`` must be the probe's.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from medexp.answers.formats.base import (
    PROBE_ID, PROBE_SET, WORDING, BadLine, Carried, Export, HarnessFormat, Reading, ReplyRecord, join_originals,
    no_manifest, reply_files, reply_record, write_text,
)

FAILED = "Failed to obtain answer"  # VLMEvalKit's FAIL_MSG, its reply when the model raised
SHEETS = (".xlsx", ".tsv", ".csv")
OWN_ID = ("index", "source_id")  # a sheet of VLMEvalKit's own dataset: its index is the release's id
# The dataset files by (has an image, has options): VLMEvalKit picks a dataset class by their columns
# and its type by the name (open-ended only when it contains "openended"); no text-only VQA dataset.
SUFFIXES = {(True, True): "", (True, False): "_openended", (False, True): "_TEXT"}


def renders_choices(probes) -> bool:
    """Whether the multiple-choice probes go out as medexp's rendered prompts (the open-ended
    datasets) rather than as VLMEvalKit's option columns: when a probe shows other labels than A, B,
    ..., which VLMEvalKit's own prompt cannot show (it letters the columns itself), every choice
    probe of the set does, so that its arms are worded alike."""
    return any(probe.labels is not None for probe in probes)


def write(export: Export) -> list[Path]:
    import pandas as pd

    from medexp.answers.prompt import render_prompt
    from medexp.benchmarks.options import LETTERS
    from medexp.kernel.hashing import file_sha256

    rendered = renders_choices(export.probes)
    # free text, or a choice probe asked as its rendered prompt: VLMEvalKit's VQA datasets need an image
    blind_free_text = [probe for probe in export.probes if probe.image is None and (rendered or not probe.is_choice)]
    if blind_free_text:
        asked_so = "; a set with relabelled options asks every choice as free text" if rendered else ""
        raise ValueError(f"format=vlmevalkit: VLMEvalKit has no custom dataset for a free-text question without an "
                         f"image (its VQA datasets are image datasets and drop a row without one), and "
                         f"{len(blind_free_text)} probe(s) of this set are such (kinds "
                         f"{sorted({probe.kind for probe in blind_free_text})}{asked_so}); export them as "
                         "openai_batch, lmms_eval, inspect_ai or jsonl")
    groups: dict[tuple[bool, bool], list[dict[str, Any]]] = {}
    # per file, an image's content -> the index of its first row there, which carries it
    first_row: dict[tuple[bool, bool], dict[str, int]] = {}
    digests: dict[Any, str] = {}  # image path -> its content hash (an image serves several probes)
    for index, probe in enumerate(export.probes):
        row: dict[str, Any] = {"index": index}
        columns = probe.is_choice and not rendered  # the options as VLMEvalKit's A, B, ... columns
        group = (probe.image is not None, columns)
        if probe.image is not None:
            if probe.image not in digests:
                digests[probe.image] = file_sha256(probe.image)
            digest = digests[probe.image]
            if digest in first_row.setdefault(group, {}):
                row["image"] = str(first_row[group][digest])
            else:
                first_row[group][digest] = index
                row["image"] = base64.b64encode(Path(probe.image).read_bytes()).decode("ascii")
        row["question"] = render_prompt(probe, export.answer_cfg) if probe.is_choice and rendered else probe.question
        for letter, text in zip(LETTERS, probe.options if columns else ()):
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
    for path in prediction_sheets(reading):
        rows = list(_sheet_rows(path))
        if not reading.exported and rows and PROBE_ID in rows[0][2]:
            raise no_manifest(reading, str(path), f"the sheet has a {PROBE_ID} column")
        if reading.exported:
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
            yield from join_originals(reading, rows, OWN_ID, _reply, _carried)


def _carried(row: dict) -> Carried:
    """The options (``A``.. in order, up to the first empty one) and gold (``answer``) a row of
    VLMEvalKit's own dataset carries."""
    from medexp.benchmarks.options import LETTERS

    options = []
    for letter in LETTERS:
        if not str(row.get(letter) or "").strip():
            break
        options.append(str(row[letter]))
    return Carried(options or None, row.get("answer") or None)


def _reply(row: dict) -> tuple[Any, str | None]:
    """A row's reply, and the error VLMEvalKit recorded instead (its FAIL_MSG)."""
    reply = row.get("prediction")
    if isinstance(reply, str) and reply.startswith(FAILED):
        return reply, reply
    return reply, None


def prediction_sheets(reading: Reading) -> list[Path]:
    """The prediction sheets of the reply file or folder (see the module docstring), each file
    once. Of an export: the sheets named ``<model>_<dataset>`` for a dataset it wrote. Of a
    harness's own run: every sheet but those named as another plus ``_<suffix>`` (VLMEvalKit's
    evaluations of it); name the sheet itself where two datasets' names are so related."""
    found = reply_files(reading, *(f"*{suffix}" for suffix in SHEETS))
    if reading.path.is_file():
        return found
    if reading.exported:
        datasets = [Path(name).stem for name in reading.export.manifest.files if name.endswith(".tsv")]
        sheets = [path for path in found if any(path.stem.endswith(f"_{dataset}") for dataset in datasets)]
    else:
        stems = {path.stem for path in found}
        sheets = [path for path in found
                  if not any(path.stem.startswith(f"{other}_") for other in stems if other != path.stem)]
    if not sheets:
        raise FileNotFoundError(f"{reading.path}: no prediction sheet <model>_<dataset> ({', '.join(SHEETS)}) in this "
                                "folder")
    return sheets


def _sheet_rows(path: Path) -> Iterator[tuple[int, str, dict]]:
    """The rows of a prediction sheet, every cell as text (an empty cell "")."""
    import pandas as pd

    suffix = path.suffix.lower()
    if suffix == ".xlsx":  # VLMEvalKit's default; pandas reads it with openpyxl, a dependency of medexp
        frame = pd.read_excel(path, dtype=str, keep_default_na=False)
    elif suffix in (".tsv", ".csv"):
        frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype=str, keep_default_na=False)
    else:
        raise ValueError(f"{path}: a VLMEvalKit prediction sheet is .xlsx, .tsv or .csv, not {suffix or 'no suffix'}")
    for offset, record in enumerate(frame.to_dict("records")):
        yield offset + 1, f"{path}: row {offset + 1}", record


FORMAT = HarnessFormat(
    name="vlmevalkit",
    writes="VLMEvalKit custom dataset TSVs (<name>.tsv with images and options; _openended, _TEXT: the other kinds)",
    reply_file="VLMEvalKit's prediction sheet <model>_<dataset>.xlsx/.tsv/.csv, or the folder holding them",
    write=write,
    read=read,
    carries=(),
    carries_labelled=WORDING,
)
