"""SLAKE (``format: slake``), from the official release layout or the hub dataset BoKelvin/SLAKE.

Layout: ``<root>/<split>.json`` is a JSON list of question records (img_id, img_name, question,
answer, q_lang, location, modality, answer_type, base_type, content_type, triple, qid), holding
both English and Chinese questions; images are at ``<root>/<image_dir>/<img_name>`` (image_dir
``imgs``). The hub dataset ships the same JSON files with the images as ``imgs.zip``, which is
extracted once into the cache (a local copy with only the zip works the same way).

Rows whose ``q_lang`` is in ``bench.languages`` are kept (all rows when unset), in file order;
the example id is ``qid``; meta carries answer_type, content_type, modality, location,
base_type, img_name and q_lang. The language filter selects questions, not images: an image
corpus (``bench.image_only``, as split overlap reads a reference split) reads every row, and the
rows outside the filter are marked so the run can count the images only they bring.

A row without ``qid`` or ``img_name`` is skipped; an empty question or answer is a flaw of the
example (an image corpus needs neither), both counted (see :mod:`medexp.benchmarks.skips`).

Each image folder (``imgs/xmlab<N>/``) may also hold the release's region annotations:
``detection.json``, a JSON list of single-label objects ``{label: [x, y, w, h]}`` in pixels of
``source.jpg``, and ``mask.png``, a segmentation mask the size of the image. They become the
``roi_boxes`` and ``roi_mask`` meta of every question about that image, in the shape
:mod:`medexp.benchmarks.roi` defines (None when the file is absent); a malformed
``detection.json`` fails naming the file and the item.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator, Optional

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.images import image_folder, image_size
from medexp.benchmarks.records import (
    RowProblem, SourceRow, assemble, field_text, problem_row, read_json, require_fields, require_object, split_file,
    text_field,
)
from medexp.benchmarks.roi import ROI_BOXES, ROI_MASK, corners_from_xywh, roi_entry

DEFAULT_IMAGE_DIR = "imgs"
DETECTION_FILE = "detection.json"
MASK_FILE = "mask.png"
RELEASE_LAYOUT = "slake_release"  # <root>/<image_dir>/ folder, as the authors distribute it
ARCHIVE_LAYOUT = "slake_archive"  # <root>/<image_dir>.zip, as the hub dataset ships it
ANNOTATIONS_LAYOUT = "slake_annotations"  # <root>/<split>.json read alone: no image is opened
META_FIELDS = ("answer_type", "content_type", "modality", "location", "base_type", "img_name", "q_lang")
_REQUIRED = ("qid", "img_name")  # without them a row names no example or no image


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load a SLAKE split from ``bench.root`` or the hub."""
    from medexp.benchmarks.hub import dataset_root

    image_dir = bench_cfg.image_dir or DEFAULT_IMAGE_DIR
    root = dataset_root(bench_cfg, cache_dir, [f"{bench_cfg.split}.json", f"{image_dir}.zip"])
    languages = list(bench_cfg.languages) if bench_cfg.languages is not None else None
    try:
        return load_slake(
            bench_cfg.name, root, bench_cfg.split, Path(cache_dir), languages, image_dir, bench_cfg.max_examples,
            bench_cfg.allow_outside_root, every_row=bool(bench_cfg.get("image_only")),
        )
    except FileNotFoundError as error:
        if (Path(root) / f"{bench_cfg.split}.json").is_file() and "no image folder" in str(error):
            raise FileNotFoundError(
                f"bench={bench_cfg.name}: {error}. This cell reads images; only a cell whose models are records of "
                "per-example scores (model source scores) and whose detector reads nothing else loads "
                f"{bench_cfg.split}.json alone") from error
        raise


def load_annotations(bench_cfg, cache_dir: Path) -> Benchmark:
    """A SLAKE split from its question file alone (``<split>.json``, no ``imgs/``), for a cell that
    reads no pixels: every example's image is None, its ``img_name`` stays in meta (questions still
    cluster on images), and the layout is :data:`ANNOTATIONS_LAYOUT`."""
    from medexp.benchmarks.hub import dataset_root

    root = dataset_root(bench_cfg, cache_dir, [f"{bench_cfg.split}.json"])
    languages = list(bench_cfg.languages) if bench_cfg.languages is not None else None
    return load_slake(bench_cfg.name, root, bench_cfg.split, Path(cache_dir), languages,
                      max_examples=bench_cfg.max_examples, every_row=bool(bench_cfg.get("image_only")), pixels=False)


def load_slake(
    name: str,
    root: Path,
    split: str,
    cache_dir: Path,
    languages: Optional[list[str]] = None,
    image_dir: str = DEFAULT_IMAGE_DIR,
    max_examples: int | None = None,
    allow_outside_root: bool = False,
    every_row: bool = False,
    pixels: bool = True,
) -> Benchmark:
    """Read ``<root>/<split>.json`` in file order, keeping the questions in ``languages``.

    ``every_row``: read the rows of every language too (an image corpus), marked outside the
    selection (``Benchmark.outside_selection``) when their language is not in ``languages``.
    ``pixels=False``: the images are neither looked for nor opened (examples without an image).
    """
    path = split_file(name, root, f"{split}.json")
    records = read_json(path, list, "a JSON list of question records")
    images = image_folder(Path(root), image_dir, cache_dir) if pixels else None
    rows = _rows(records, path, images, languages, every_row)
    benchmark = assemble(name, split, rows, max_examples, images, allow_outside_root, [path])
    if not pixels:
        benchmark.layout = ANNOTATIONS_LAYOUT
    else:
        benchmark.layout = RELEASE_LAYOUT if (Path(root) / image_dir).is_dir() else ARCHIVE_LAYOUT
    return benchmark


def _rows(records: list, path: Path, images: Optional[Path], languages: Optional[list[str]],
          every_row: bool) -> Iterator[SourceRow]:
    annotations: dict[Path, dict[str, Any]] = {}  # per image folder: about ten questions share one
    for index, record in enumerate(records):
        where = f"{path}[{index}]"
        selected = languages is None or (isinstance(record, dict) and record.get("q_lang") in languages)
        if not (selected or every_row):
            continue
        try:
            record = require_object(record, where, "a question record")
            require_fields(record, _REQUIRED, where)
            for key in _REQUIRED:
                problem = field_text(record, key, where)[1]
                if problem:
                    raise RowProblem(problem)
        except RowProblem as problem:
            readable_qid = isinstance(record, dict) and field_text(record, "qid", where)[1] is None
            yield problem_row(problem, where, record["qid"] if readable_qid else None)
            continue
        image = images / str(record["img_name"]) if images is not None else None
        if image is not None and image.parent not in annotations:
            annotations[image.parent] = image_annotations(image)
        flaws: dict[str, str] = {}
        yield SourceRow(
            source_id=record["qid"],
            question=text_field(record, "question", where, flaws),
            answer=text_field(record, "answer", where, flaws),
            image=image,
            meta={**{key: record.get(key) for key in META_FIELDS},
                  **(annotations[image.parent] if image is not None else {ROI_BOXES: None, ROI_MASK: None})},
            where=where,
            flaws=flaws,
            selected=selected,
        )


def image_annotations(image: Path) -> dict[str, Any]:
    """The ROI meta of one image from the ``detection.json`` and ``mask.png`` beside it.

    Boxes need the image size; when the image itself cannot be read its questions are skipped
    later (missing or corrupt image), so the boxes stay None, but the file is still checked.
    """
    detection, mask = image.parent / DETECTION_FILE, image.parent / MASK_FILE
    boxes = None
    if detection.is_file():
        labelled = detection_boxes(detection)
        size = image_size(image)
        if size is not None:
            boxes = [roi_entry(label, box, size) for label, box in labelled]
            _check_inside(detection, boxes, size)
    return {ROI_BOXES: boxes, ROI_MASK: str(mask) if mask.is_file() else None}


def detection_boxes(path: Path) -> list[tuple[str, list[float]]]:
    """``(label, [x0, y0, x1, y1])`` pixel corners of each object in a SLAKE ``detection.json``."""
    items = read_json(path, list, "a JSON list of {label: [x, y, w, h]} objects")
    boxes = []
    for index, item in enumerate(items):
        where = f"{path}: item {index}"
        if not isinstance(item, dict) or len(item) != 1:
            raise ValueError(f"{where}: expected one {{label: [x, y, w, h]}} object, got {item!r}")
        (label, xywh), = item.items()
        if not label.strip():
            raise ValueError(f"{where}: the label is empty")
        if not (isinstance(xywh, list) and len(xywh) == 4 and all(_is_number(value) for value in xywh)):
            raise ValueError(f"{where}: {label!r} needs [x, y, w, h], four numbers in pixels, got {xywh!r}")
        if xywh[2] < 0 or xywh[3] < 0:
            raise ValueError(f"{where}: {label!r} has a negative width or height: {xywh!r}")
        boxes.append((label, corners_from_xywh(*xywh)))
    return boxes


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_inside(path: Path, boxes: list[dict], size: tuple[int, int]) -> None:
    """A box that misses the image entirely belongs to another image: fail. Overhangs are clipped."""
    for box in boxes:
        x0, y0, x1, y1 = box["box_px"]
        if x0 >= size[0] or y0 >= size[1] or x1 <= 0 or y1 <= 0:
            raise ValueError(
                f"{path}: {box['label']!r} box {box['box_px']} (x0, y0, x1, y1) lies outside the "
                f"{size[0]}x{size[1]} image beside it"
            )
