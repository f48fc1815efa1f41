"""Image classification datasets: an image and its class, the class as the example's answer.

* ``image_folder``: ``<root>/<split>/<class>/<image>``, the folder names the class (torchvision's
  ImageFolder layout). Released order: classes sorted by name, then file names sorted, since a
  folder has no order of its own. The source id is ``<class>/<file name>``.
* ``image_csv``: a metadata CSV under the root with an image-id column and a label column,
  images in one or more folders under the root (the first folder holding the file wins).
  Released order: the file's row order. HAM10000 is the documented example:
  ``HAM10000_metadata.csv`` with ``image_id`` and ``dx``, images ``<image_id>.jpg`` in
  ``HAM10000_images_part_1`` and ``HAM10000_images_part_2``.
* ``demo_classes``: the generated demo set, in the image_folder layout (loaded by :mod:`medexp.demo.loaders`).

A classifier reads no text, so the question is ``""``. ``meta`` holds ``label`` (the class) and
``class_frequency`` (the class's share of the split's usable examples), plus the CSV's other
columns. A row whose image is missing or does not decode is skipped and counted.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
from collections import Counter
from pathlib import Path
from typing import Iterator

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.images import MISSING_IMAGE
from medexp.benchmarks.records import SourceRow, assemble, split_file

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def load_image_folder(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load a ``format: image_folder`` split from ``bench.root``."""
    if not bench_cfg.root:
        raise ValueError(f"bench={bench_cfg.name}: set bench.root=/path/to/{bench_cfg.name} (format image_folder)")
    return image_folder(bench_cfg.name, Path(bench_cfg.root).expanduser(), bench_cfg.split, bench_cfg.max_examples)


def image_folder(name: str, root: Path, split: str, max_examples: int | None = None) -> Benchmark:
    """Read ``<root>/<split>/<class>/<image>``; files without an image suffix are ignored (counted in the log)."""
    split_dir = Path(root) / split
    if not split_dir.is_dir():
        raise FileNotFoundError(f"benchmark {name!r}: no split folder {split_dir} (layout <root>/<split>/<class>/<image>)")
    classes = sorted(entry.name for entry in split_dir.iterdir() if entry.is_dir())
    if not classes:
        raise ValueError(f"benchmark {name!r}: {split_dir} holds no class folders (layout <root>/<split>/<class>/<image>)")
    ignored = []

    def rows() -> Iterator[SourceRow]:
        for label in classes:
            for path in sorted((split_dir / label).iterdir()):
                if not (path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES):
                    ignored.append(path)
                    continue
                yield SourceRow(f"{label}/{path.name}", "", label, image=path, meta={"label": label})

    benchmark = assemble(name, split, rows(), max_examples, files=[split_dir])
    if ignored:
        log.warning("bench=%s: ignored %d entries that are not image files (first: %s)", name, len(ignored), ignored[0])
    return with_class_frequencies(benchmark)


def load_image_csv(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load a ``format: image_csv`` dataset: ``bench.csv_file`` rows in file order."""
    unset = [key for key in ("root", "csv_file", "image_column", "label_column") if not bench_cfg.get(key)]
    if unset:
        raise ValueError(f"bench={bench_cfg.name}: format image_csv needs bench.{', bench.'.join(unset)} "
                         "(e.g. csv_file: HAM10000_metadata.csv, image_column: image_id, label_column: dx)")
    root = Path(bench_cfg.root).expanduser()
    path = split_file(bench_cfg.name, root, bench_cfg.csv_file)
    folders = [root / folder for folder in (bench_cfg.image_dirs or ["."])]
    missing = [str(folder) for folder in folders if not folder.is_dir()]
    if missing:
        raise FileNotFoundError(f"bench={bench_cfg.name}: image folder(s) {missing} do not exist (bench.image_dirs)")
    rows = _csv_rows(path, folders, bench_cfg.image_column, bench_cfg.label_column, bench_cfg.image_extension or "")
    return with_class_frequencies(assemble(bench_cfg.name, bench_cfg.split, rows, bench_cfg.max_examples, files=[path]))


def _csv_rows(path: Path, folders: list[Path], image_column: str, label_column: str, extension: str) -> Iterator[SourceRow]:
    files: dict[str, Path] = {}
    for folder in reversed(folders):  # the first folder listed wins
        files.update({entry.name: Path(entry.path) for entry in _scan(folder)})
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        absent = [column for column in (image_column, label_column) if column not in (reader.fieldnames or [])]
        if absent:
            raise ValueError(f"{path}: no column(s) {absent}; the file has {reader.fieldnames}")
        for line, record in enumerate(reader, start=2):
            image_id = (record[image_column] or "").strip()
            label = (record[label_column] or "").strip()
            file_name = image_id if Path(image_id).suffix.lower() in IMAGE_SUFFIXES else image_id + extension
            meta = {key: value for key, value in record.items() if key not in (image_column, label_column)}
            problem = None
            if not image_id or not label:
                problem = f"missing field: {path}:{line}: empty {image_column if not image_id else label_column}"
            elif file_name not in files:
                problem = f"{MISSING_IMAGE}: {file_name} is in none of {[str(folder) for folder in folders]}"
            yield SourceRow(image_id or f"line{line}", "", label, image=files.get(file_name),
                            meta={**meta, "label": label}, problem=problem, where=f"{path}:{line}")


def _scan(folder: Path):
    import os

    with os.scandir(folder) as entries:
        return [entry for entry in entries if entry.is_file()]


def with_class_frequencies(benchmark: Benchmark) -> Benchmark:
    """The benchmark with ``meta["class_frequency"]``: each answer's share of its examples."""
    counts = Counter(example.answer for example in benchmark.examples)
    total = len(benchmark.examples)
    examples = [
        dataclasses.replace(example, meta={**example.meta, "class_frequency": counts[example.answer] / total})
        for example in benchmark.examples
    ]
    log.info("bench=%s: %d classes, %s", benchmark.name, len(counts),
             ", ".join(f"{label} {count / total:.1%}" for label, count in sorted(counts.items())))
    return dataclasses.replace(benchmark, examples=examples)
