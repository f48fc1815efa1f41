"""MedVIGIL (``format: medvigil``): the cases of the release, as examples.

Release layout (the Hugging Face dataset jhq0709/MedVIGIL, or a local copy at ``bench.root``):

* ``manifest.csv``: one row per case, columns case_id, source_dataset, modality, image_file,
  question, gold_answer, risk_tier (L1-L5), text_only_answerable, annotator_notes;
* ``grounding.csv``: case_id, roi_bbox_norm (a JSON list ``[x0, y0, x1, y1]`` in image fractions)
  and optionally roi_pointer (what the box shows), laterality_dependent, gold_after_lr_flip;
* ``probes_mcq.csv``: the probes (read by :mod:`medexp.probes.medvigil_release`);
* ``images/`` the case images, ``images_perturbed/`` the released ROI and flip variants.

An ``image_file`` that starts with ``images_perturbed/`` is relative to the root; any other is
relative to ``images/``; an empty one names no image. Cases from credentialed sources (the
MIMIC-CXR/CheXpert chest X-rays) ship without images: they are skipped and counted as
"credentialed image absent", as are other absent or undecodable images ("missing image",
"corrupt image").

The example id is ``<bench>::<split>::<case_id>`` (``medvigil::test::MVB-0031``); the release has
no splits, so ``split`` only names the copy. The answer is gold_answer; meta carries
source_dataset, modality, risk_tier, text_only_answerable (True, False, or None when blank),
annotator_notes, roi (the box or None), roi_boxes (see :mod:`medexp.benchmarks.roi`),
laterality_dependent and gold_after_lr_flip (None when the grounding file lacks them).
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path
from typing import Iterator, Optional

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.records import MALFORMED_ROW, MISSING_ID, SourceRow, assemble, problem_row, split_file
from medexp.benchmarks.roi import RoiBox
from medexp.config.tiers import check_tier

log = logging.getLogger(__name__)

MANIFEST = "manifest.csv"
GROUNDING = "grounding.csv"
PROBES = "probes_mcq.csv"
IMAGES = "images"
PERTURBED = "images_perturbed"
MANIFEST_COLUMNS = ("case_id", "source_dataset", "modality", "image_file", "question", "gold_answer",
                    "risk_tier", "text_only_answerable", "annotator_notes")
GROUNDING_COLUMNS = ("case_id", "roi_bbox_norm")
# Upstream corpora that need a credential: their images are not redistributed.
CREDENTIALED_SOURCES = frozenset({"cxr", "mimic-cxr", "mimic_cxr", "mimic", "chexpert"})
CREDENTIALED_ABSENT = "credentialed image absent"
HUB_FILES = (MANIFEST, GROUNDING, PROBES, f"{IMAGES}/*", f"{PERTURBED}/*")
_TRUE = {"true", "yes", "1", "y", "t"}
_FALSE = {"false", "no", "0", "n", "f"}


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load the MedVIGIL cases from ``bench.root`` or the hub."""
    from medexp.benchmarks.hub import dataset_root

    root = dataset_root(bench_cfg, cache_dir, list(HUB_FILES))
    return load_medvigil(bench_cfg.name, root, bench_cfg.split, bench_cfg.max_examples, bench_cfg.allow_outside_root)


def load_medvigil(name: str, root: Path, split: str = "test", max_examples: Optional[int] = None,
                  allow_outside_root: bool = False) -> Benchmark:
    """The manifest's cases in file order, with their grounding; every image file must resolve
    inside ``root`` (``../`` or an absolute path in the manifest is refused, naming its line)
    unless ``allow_outside_root``."""
    root = Path(root)
    grounding = read_grounding(root)
    files = [root / GROUNDING, root / MANIFEST] if (root / GROUNDING).is_file() else [root / MANIFEST]
    return assemble(name, split, _rows(name, root, grounding), max_examples, root, allow_outside_root, files=files)


def read_csv(path: Path, required: tuple[str, ...]) -> Iterator[tuple[str, dict[str, str]]]:
    """``("<file>:<line>", row)`` for every record; a missing column fails naming the file."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [column for column in required if column not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing} (has {reader.fieldnames}); "
                             f"expected at least {list(required)}")
        for row in reader:
            yield f"{path}:{reader.line_num}", {key: (value or "") for key, value in row.items() if key is not None}


def resolve_image(root: Path, image_file: str) -> Optional[Path]:
    """Where a release ``image_file`` lives: under the root for images_perturbed/, else images/."""
    image_file = image_file.strip()
    if not image_file:
        return None
    if image_file.startswith(f"{PERTURBED}/"):
        return Path(root) / image_file
    return Path(root) / IMAGES / image_file


def parse_flag(value: str, where: str) -> Optional[bool]:
    """A release yes/no cell (TRUE, No, 1, ...) as a bool; blank is None (not recorded)."""
    text = value.strip().lower()
    if not text:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{where}: {value!r} is not a yes/no value ({sorted(_TRUE | _FALSE)} or blank)")


def read_grounding(root: Path) -> dict[str, dict]:
    """case_id -> grounding meta; an unusable box is logged and left out (the harness skips it too)."""
    path = Path(root) / GROUNDING
    if not path.is_file():
        log.warning("MedVIGIL copy at %s has no %s: cases carry no region of interest", root, GROUNDING)
        return {}
    grounding: dict[str, dict] = {}
    bad = []
    for where, row in read_csv(path, GROUNDING_COLUMNS):
        box = None
        text = row["roi_bbox_norm"].strip()
        if text:
            try:
                values = json.loads(text)
                box = RoiBox(row.get("roi_pointer", "").strip() or "roi", tuple(float(v) for v in values))
            except (ValueError, TypeError) as error:
                bad.append(f"{where}: {row['case_id']}: {error}")
        grounding[row["case_id"].strip()] = {
            "roi": list(box.box_norm) if box else None,
            "roi_boxes": [box.as_meta()] if box else [],
            "laterality_dependent": parse_flag(row.get("laterality_dependent", ""), where),
            "gold_after_lr_flip": row.get("gold_after_lr_flip", "").strip() or None,
        }
    if bad:
        log.warning("%d unusable ROI box(es) in %s left out, e.g. %s", len(bad), path, bad[:3])
    return grounding


def _rows(name: str, root: Path, grounding: dict[str, dict]) -> Iterator[SourceRow]:
    path = split_file(name, root, MANIFEST)
    for where, row in read_csv(path, MANIFEST_COLUMNS):
        case_id = row["case_id"].strip()
        if not case_id:
            yield problem_row(f"{MISSING_ID}: {where}: empty case_id", where)
            continue
        try:
            tier = check_tier(row["risk_tier"], f"{where} ({case_id})")
            answerable = parse_flag(row["text_only_answerable"], f"{where} ({case_id})")
        except ValueError as error:
            yield problem_row(f"{MALFORMED_ROW}: {error}", where, case_id)
            continue
        source = row["source_dataset"].strip()
        image = resolve_image(root, row["image_file"])
        problem = None
        if image is None or not image.is_file():
            shown = image if image is not None else "(no image_file)"
            if source.lower() in CREDENTIALED_SOURCES:
                problem = (f"{CREDENTIALED_ABSENT}: {source} image {shown} is not redistributed; "
                           "reconstruct it from the credentialed source corpus")
            elif image is None:
                problem = f"missing image: {where}: the manifest lists no image_file"
        yield SourceRow(
            source_id=case_id,
            question=row["question"],
            answer=row["gold_answer"],
            image=image,
            problem=problem,
            where=where,
            meta={
                "case_id": case_id,
                "source_dataset": source,
                "modality": row["modality"].strip(),
                "risk_tier": tier,
                "text_only_answerable": answerable,
                "annotator_notes": row["annotator_notes"],
                **grounding.get(case_id, {"roi": None, "roi_boxes": [], "laterality_dependent": None,
                                          "gold_after_lr_flip": None}),
            },
        )
