"""PMC-OA figure corpus (``format: pmc_oa``): the reference images of the image detector.

Layout (that of the hub dataset axiong/pmc_oa): ``<root>/<split>.jsonl`` with one
``{"image": <file name>, "caption": <text>}`` object per line, images under
``<root>/<image_dir>/`` (image_dir ``images``), or only the ``<image_dir>.zip`` archive, which is
extracted once into the cache. Each figure becomes an image-only example: question ``""``,
answer = the caption (a figure without one is kept: a corpus needs images, not captions), id =
the image file name; other keys go to ``meta``. A line without an image is skipped and counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.images import image_folder
from medexp.benchmarks.records import (
    RowProblem, SourceRow, assemble, jsonl_records, problem_row, required_text, split_file, text_field,
)

DEFAULT_IMAGE_DIR = "images"
_REQUIRED = ("image", "caption")


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load a PMC-OA split from ``bench.root`` or the hub."""
    from medexp.benchmarks.hub import dataset_root

    image_dir = bench_cfg.image_dir or DEFAULT_IMAGE_DIR
    root = dataset_root(bench_cfg, cache_dir, [f"{bench_cfg.split}.jsonl", f"{image_dir}.zip"])
    path = split_file(bench_cfg.name, root, f"{bench_cfg.split}.jsonl")
    images = image_folder(root, image_dir, Path(cache_dir))
    return assemble(bench_cfg.name, bench_cfg.split, _rows(path, images), bench_cfg.max_examples, images,
                    bench_cfg.allow_outside_root, [path])


def _rows(path: Path, images: Path) -> Iterator[SourceRow]:
    for where, record in jsonl_records(path):
        try:
            if isinstance(record, RowProblem):
                raise record
            required_text(record, "image", where)
        except RowProblem as problem:
            yield problem_row(problem, where)
            continue
        flaws: dict[str, str] = {}
        yield SourceRow(
            source_id=record["image"],
            question="",
            answer=text_field(record, "caption", where, flaws, as_field="answer"),
            image=images / str(record["image"]),
            meta={key: value for key, value in record.items() if key not in _REQUIRED},
            where=where,
            flaws=flaws,
        )
