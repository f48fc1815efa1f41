"""PathVQA (He et al., 2020) from the authors' release or from the hub parquet copy.

``format: pathvqa`` reads either layout, told apart by what ``bench.root`` holds (as VQA-RAD's):

1. **The authors' layout** (https://github.com/UCSD-AI4H/PathVQA, the QA files of its LXMERT
   baseline and the images of its data release): ``<root>/pvqa_<split>.json`` for the splits
   ``train``, ``val`` (``validation`` is accepted) and ``test``, each a JSON list of image
   records ``{"img_id": "test_0001", "sentf": {"pvqa": [question, ...]}, "labelf": {"pvqa":
   [{"<answer>": 1}, ...]}}``, the i-th label answering the i-th question (a label naming several
   answers gives its highest-scored one), and the images at ``<root>/images/<split>/<img_id>.jpg``
   (``bench.image_dir`` names another folder than ``images``; ``images.zip`` works too).
   Questions are read in released order: records in file order, each record's questions in
   order. Layout ``pathvqa_release``.
2. **The hub copy** ``flaviagiammarino/path-vqa``: parquet shards read as ``format: hf_parquet``
   reads them (splits train, validation, test; ``val`` reads ``validation``). Used when
   ``bench.root`` is unset (fetched from ``bench.hub_id``) or holds parquet shards. Layout
   ``hf_parquet``.

``bench.dedup`` (on in conf/bench/pathvqa.yaml) drops, from the authors' files, every question
repeating an earlier (image, question, answer) triple of its split, as the hub copy was made
(``drop_duplicates`` on the triples, first kept): 6,761 test questions become the 6,719 the hub
copy and the controlled audit use. The number removed and where each was are logged and kept on
the benchmark (``Benchmark.removed_duplicates``, printed by ``medexp.inspect``). The hub copy is
deduplicated already, so the setting changes nothing there.

Ids: ``pathvqa::<split>::<n>``, ``n`` the question's index among the questions kept in released
order, the hub copy's numbering (its row index); without dedup, the index among all questions.
The hub copy lower-cased and re-spaced its text; the release's text is kept as published. Meta:
``img_id`` and ``release_row`` (the question's index among all questions of the file). A record
that is not an object or has no ``img_id`` is skipped with its questions, counted; an empty
question or a missing answer is a flaw of the example (see :mod:`medexp.benchmarks.skips`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Iterator

from medexp.benchmarks.base import Benchmark, SkippedExample
from medexp.benchmarks.images import image_folder
from medexp.benchmarks.records import (
    MALFORMED_ROW, MISSING_FIELD, SourceRow, assemble, field_text, json_type, problem_row, read_json, split_file,
)

log = logging.getLogger(__name__)

RELEASE_LAYOUT = "pathvqa_release"
DEFAULT_IMAGE_DIR = "images"
IMAGE_SUFFIX = ".jpg"
TASK = "pvqa"  # the key of the questions and labels in sentf / labelf
# bench.split -> the release's file split; the hub copy names the validation split "validation"
RELEASE_SPLITS = {"train": "train", "val": "val", "validation": "val", "test": "test"}
HUB_SPLITS = {"val": "validation"}
REPEATED_ROW = "repeated row"
_SHOWN = 10  # removed rows named in the log line


def release_file(split: str) -> str:
    """``pvqa_<split>.json`` of a bench split (``validation`` -> ``pvqa_val.json``)."""
    if split not in RELEASE_SPLITS:
        raise ValueError(f"PathVQA has splits {sorted(set(RELEASE_SPLITS))}, not {split!r}")
    return f"pvqa_{RELEASE_SPLITS[split]}.json"


def detect_layout(root: Path, split: str) -> str:
    """``pathvqa_release`` when ``root`` holds the split's ``pvqa_<split>.json``, ``hf_parquet``
    when it holds parquet shards of the split, else an error naming both and what it holds."""
    from medexp.benchmarks.hf_parquet import release_or_hub_layout

    release = f"the authors' PathVQA files ({release_file(split)} beside {DEFAULT_IMAGE_DIR}/{RELEASE_SPLITS[split]}/)"
    return release_or_hub_layout(root, release_file(split), RELEASE_LAYOUT, HUB_SPLITS.get(split, split), release)


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """``format: pathvqa``: the layout ``bench.root`` holds, or the hub copy when it is unset."""
    from medexp.benchmarks import hf_parquet
    from medexp.benchmarks.hub import dataset_root

    release_file(bench_cfg.split)  # an unknown split fails before any download
    if bench_cfg.root and detect_layout(dataset_root(bench_cfg, cache_dir, ()), bench_cfg.split) == RELEASE_LAYOUT:
        return load_release(bench_cfg.name, Path(bench_cfg.root).expanduser(), bench_cfg.split, Path(cache_dir),
                            bench_cfg.image_dir, bool(bench_cfg.dedup), bench_cfg.max_examples,
                            bench_cfg.allow_outside_root)
    hub_cfg = bench_cfg.copy()
    hub_cfg.split = HUB_SPLITS.get(bench_cfg.split, bench_cfg.split)
    benchmark = hf_parquet.load(hub_cfg, cache_dir)
    benchmark.layout = hf_parquet.HUB_LAYOUT
    return benchmark


def load_release(
    name: str,
    root: Path,
    split: str,
    cache_dir: Path,
    image_dir: str | None = None,
    dedup: bool = True,
    max_examples: int | None = None,
    allow_outside_root: bool = False,
) -> Benchmark:
    """Read the authors' ``pvqa_<split>.json`` in released order (see the module docstring)."""
    path = split_file(name, root, release_file(split))
    records = read_json(path, list, "a JSON list of image records (img_id, sentf, labelf)")
    folder = image_folder(root, image_dir or DEFAULT_IMAGE_DIR, cache_dir)  # images/ or the extracted images.zip
    removed: list[SkippedExample] = []
    rows = _rows(records, path, folder / RELEASE_SPLITS[split], removed if dedup else None)
    benchmark = assemble(name, split, rows, max_examples, folder, allow_outside_root, [path])
    benchmark.layout = RELEASE_LAYOUT
    benchmark.removed_duplicates = removed
    if dedup:
        log.info("bench=%s split=%s: dedup removed %d question(s) repeating an earlier (image, question, answer) "
                 "triple%s", name, split, len(removed),
                 f": {'; '.join(item.reason for item in removed[:_SHOWN])}" + (" ..." if len(removed) > _SHOWN else "")
                 if removed else "")
    return benchmark


def _rows(records: list, path: Path, images: Path, removed: list[SkippedExample] | None) -> Iterator[SourceRow]:
    """The questions of every image record; with ``removed``, repeated triples are left out and
    recorded there."""
    first_seen: dict[str, str] = {}  # the triple, as JSON -> where it was first read
    number = 0  # the next kept question's id
    release_row = 0
    for index, record in enumerate(records):
        where = f"{path}[{index}]"
        questions = _questions(record, where)
        if isinstance(questions, str):
            yield problem_row(questions, where)
            continue
        img_id = record["img_id"]
        for k, (question, label) in enumerate(questions):
            row_where = f"{where} ({img_id}) question {k}"
            raw_answer, answer, answer_problem = _answer(label, row_where)
            if removed is not None:
                triple = json.dumps([img_id, question, raw_answer], ensure_ascii=False)
                if triple in first_seen:
                    removed.append(SkippedExample(None, f"{REPEATED_ROW}: {row_where}: same image, question and "
                                                        f"answer as {first_seen[triple]}", row_where))
                    release_row += 1
                    continue
                first_seen[triple] = row_where
            flaws: dict[str, str] = {}
            question_text, question_problem = field_text({"question": question}, "question", row_where)
            if question_problem:
                flaws["question"] = question_problem
            if answer_problem:
                flaws["answer"] = answer_problem
            yield SourceRow(
                source_id=number,
                question=question_text,
                answer=answer,
                image=images / f"{img_id}{IMAGE_SUFFIX}",
                meta={"img_id": img_id, "release_row": release_row},
                where=row_where,
                flaws=flaws,
            )
            number += 1
            release_row += 1


def _questions(record: Any, where: str) -> list[tuple[Any, Any]] | str:
    """The record's (question, label) pairs, or why it cannot give any. A question without a
    label is paired with None (a missing answer); labels without a question are ignored."""
    if not isinstance(record, dict):
        return f"{MALFORMED_ROW}: {where}: expected an image record (a JSON object), got {record!r}"
    if not isinstance(record.get("img_id"), str) or not record["img_id"].strip():
        return f"{MISSING_FIELD}: {where}: no img_id (has {sorted(record)})"
    sentf, labelf = record.get("sentf"), record.get("labelf")
    questions = sentf.get(TASK) if isinstance(sentf, dict) else None
    if not isinstance(questions, list):
        return f"{MALFORMED_ROW}: {where} ({record['img_id']}): sentf.{TASK} is not a list of questions ({json_type(sentf)})"
    labels = labelf.get(TASK) if isinstance(labelf, dict) else None
    labels = labels if isinstance(labels, list) else []
    return [(question, labels[k] if k < len(labels) else None) for k, question in enumerate(questions)]


def _answer(label: Any, where: str) -> tuple[Any, str, str | None]:
    """``(the answer as written, its text, None)`` for a label ``{"<answer>": score}`` (the
    highest-scored answer), else ``(None, "", reason)``."""
    if label is None or label == {}:
        return None, "", f"missing answer: {where}: no label in labelf.{TASK}"
    if not isinstance(label, dict):
        return None, "", (f"malformed answer: {where}: the label is a JSON {json_type(label)} ({label!r}), "
                          "not {answer: score}")
    best = max(label, key=lambda answer: label[answer] if isinstance(label[answer], (int, float)) else 0)
    return (best, *field_text({"answer": best}, "answer", where))
