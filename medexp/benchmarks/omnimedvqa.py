"""OmniMedVQA (``format: omnimedvqa``): multiple-choice medical VQA, from the public release.

Two layouts are read, the first one found under the root:

1. The release: ``<root>/QA_information/Open-access/<dataset>.json``, each a JSON list of records
   (dataset, question_id, question_type, question, gt_answer, image_path, option_A..option_D,
   some options absent, modality_type); ``image_path`` is relative to the root
   (``Images/<dataset>/...``). Files are read in sorted file-name order, rows in file order.
2. A parquet mirror: shards of ``bench.split`` (hub naming, see hf_parquet) with the same
   columns, the image as a datasets ``Image`` column ``image`` or as ``image_path``.

Options are the present ones of A..D, in letter order. ``gt_answer`` is normally the option text;
a bare letter A-D is replaced by that option's text. A row without question_id or image is
skipped (counted); an empty question or gt_answer, or a gt_answer that is none of the options
(a letter naming an absent option: "unmatched answer"), is a flaw of the example, skipped by a
task that needs the answer (see :mod:`medexp.benchmarks.skips`). The id is ``question_id``;
meta carries the other scalar fields (dataset, question_type, modality_type, image_path) and
``answer_letter``. ``bench.max_examples`` caps
the rows read, corrupt images included (the audit: first 5,000 rows, 4,999 usable).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.hf_parquet import IMAGE_COLUMN, image_fields, local_shards, read_rows, scalar_meta, split_patterns
from medexp.benchmarks.records import (
    RowProblem, SourceRow, assemble, problem_row, require_fields, require_object, required_text, text_field,
)

QA_DIR = Path("QA_information") / "Open-access"
LETTERS = ("A", "B", "C", "D")
UNMATCHED_ANSWER = "unmatched answer"
_REQUIRED = ("question_id",)
_OPTION_KEYS = tuple(f"option_{letter}" for letter in LETTERS)
_TEXT_KEYS = ("question_id", "question", "gt_answer", IMAGE_COLUMN, *_OPTION_KEYS)
_BARE_LETTER = re.compile(r"^\(?([A-D])[).]?$")


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load OmniMedVQA from ``bench.root`` or the hub mirror ``bench.hub_id``."""
    from medexp.benchmarks.hub import dataset_root

    patterns = [f"{QA_DIR.as_posix()}/*.json", "Images/*", *split_patterns(bench_cfg.split)]
    root = dataset_root(bench_cfg, cache_dir, patterns)
    files = qa_files(root, bench_cfg.split)
    rows = qa_rows(root, files, Path(cache_dir))
    return assemble(bench_cfg.name, bench_cfg.split, rows, bench_cfg.max_examples, root, bench_cfg.allow_outside_root,
                    [file if isinstance(file, Path) else root / file.name for file in files])


def qa_files(root: Path, split: str) -> list:
    """The release's QA json files (sorted by name), else the split's parquet shards."""
    qa_dir = root / QA_DIR
    if qa_dir.is_dir():
        files = sorted(qa_dir.glob("*.json"), key=lambda path: path.name)
        if not files:
            raise FileNotFoundError(f"no QA json files in {qa_dir}")
        return files
    return local_shards(root, split)


def qa_rows(root: Path, files: list, cache_dir: Path) -> Iterator[SourceRow]:
    """The QA records of ``files`` (:func:`qa_files`) as rows, in file order."""
    if files and isinstance(files[0], Path):
        for path in files:
            records = json.loads(path.read_text(encoding="utf-8"))
            for index, record in enumerate(records):
                where = f"{path}[{index}]"
                try:
                    require_fields(require_object(record, where, "a QA record"), (*_REQUIRED, "image_path"), where)
                except RowProblem as problem:
                    yield problem_row(problem, where)
                    continue
                yield _row(record, where, {"image": root / record["image_path"]})
        return
    for index, record in read_rows(files):
        yield _row(record, f"row {index}", _parquet_image(record, root, cache_dir, index))


def _parquet_image(record: dict, root: Path, cache_dir: Path, index: int) -> dict[str, Any]:
    if record.get(IMAGE_COLUMN) is None and record.get("image_path"):
        return {"image": root / record["image_path"]}
    return image_fields(record.get(IMAGE_COLUMN), root, cache_dir, f"row {index}")


def _row(record: dict, where: str, image: dict[str, Any]) -> SourceRow:
    try:
        required_text(record, "question_id", where)
    except RowProblem as problem:
        return problem_row(problem, where)
    flaws: dict[str, str] = {}
    options = {letter: str(record[key]) for letter, key in zip(LETTERS, _OPTION_KEYS) if record.get(key) is not None}
    answer, letter = gold_answer(text_field(record, "gt_answer", where, flaws, as_field="answer"), options)
    if options and letter is None and "answer" not in flaws:
        # the gold is unknown: a flaw of the answer (an image corpus still uses the row's image)
        flaws["answer"] = f"{UNMATCHED_ANSWER}: {where}: gt_answer {record['gt_answer']!r} is not among the options"
        answer = ""
    return SourceRow(
        source_id=record["question_id"],
        question=text_field(record, "question", where, flaws),
        answer=answer,
        options=tuple(options.values()) or None,
        meta={**scalar_meta(record, _TEXT_KEYS), "answer_letter": letter},
        where=where,
        flaws=flaws,
        **image,
    )


def gold_answer(gt_answer: str, options: dict[str, str]) -> tuple[str, str | None]:
    """The gold answer text and its option letter (None when there are no options).

    The text of an option wins over the letter reading, so an option literally named "A" keeps
    its meaning; otherwise a bare letter ("B", "(B)", "B.") maps to that option's text.
    """
    text = gt_answer.strip()
    for letter, option in options.items():
        if option.strip() == text:
            return option, letter
    bare = _BARE_LETTER.match(text)
    if bare and bare.group(1) in options:
        return options[bare.group(1)], bare.group(1)
    return text, None
