"""SLAKE (``format: slake``), from the official release layout or the hub dataset BoKelvin/SLAKE.

Layout: ``<root>/<split>.json`` is a JSON list of question records (img_id, img_name, question,
answer, q_lang, location, modality, answer_type, base_type, content_type, triple, qid), holding
both English and Chinese questions; images are at ``<root>/<image_dir>/<img_name>`` (image_dir
``imgs``). The hub dataset ships the same JSON files with the images as ``imgs.zip``, which is
extracted once into the cache (a local copy with only the zip works the same way).

Rows whose ``q_lang`` is in ``bench.languages`` are kept (all rows when unset), in file order;
the example id is ``qid``; meta carries answer_type, content_type, modality, location,
base_type, img_name and q_lang.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, Optional

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.images import image_folder
from medexp.benchmarks.records import SourceRow, assemble, require_fields, required_text, split_file

DEFAULT_IMAGE_DIR = "imgs"
META_FIELDS = ("answer_type", "content_type", "modality", "location", "base_type", "img_name", "q_lang")
_REQUIRED = ("qid", "question", "answer", *META_FIELDS)


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load a SLAKE split from ``bench.root`` or the hub."""
    from medexp.benchmarks.hub import dataset_root

    image_dir = bench_cfg.image_dir or DEFAULT_IMAGE_DIR
    root = dataset_root(bench_cfg, cache_dir, [f"{bench_cfg.split}.json", f"{image_dir}.zip"])
    languages = list(bench_cfg.languages) if bench_cfg.languages is not None else None
    return load_slake(
        bench_cfg.name, root, bench_cfg.split, Path(cache_dir), languages, image_dir, bench_cfg.max_examples,
        bench_cfg.allow_outside_root,
    )


def load_slake(
    name: str,
    root: Path,
    split: str,
    cache_dir: Path,
    languages: Optional[list[str]] = None,
    image_dir: str = DEFAULT_IMAGE_DIR,
    max_examples: int | None = None,
    allow_outside_root: bool = False,
) -> Benchmark:
    """Read ``<root>/<split>.json`` in file order, keeping the questions in ``languages``."""
    path = split_file(name, root, f"{split}.json")
    records = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(records, list):
        raise ValueError(f"{path}: expected a JSON list of question records, got {type(records).__name__}")
    images = image_folder(Path(root), image_dir, cache_dir)
    rows = _rows(records, path, images, languages)
    return assemble(name, split, rows, max_examples, images, allow_outside_root)


def _rows(records: list, path: Path, images: Path, languages: Optional[list[str]]) -> Iterator[SourceRow]:
    for index, record in enumerate(records):
        where = f"{path}[{index}]"
        require_fields(record, _REQUIRED, where)
        if languages is not None and record["q_lang"] not in languages:
            continue
        yield SourceRow(
            source_id=record["qid"],
            question=required_text(record, "question", where),
            answer=required_text(record, "answer", where),
            image=images / record["img_name"],
            meta={key: record[key] for key in META_FIELDS},
            where=where,
        )
