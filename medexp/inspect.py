"""``python -m medexp.inspect bench=<name> [bench.root=...] [other overrides]``

Loads one benchmark exactly as a cell would and prints a JSON summary on stdout, to check a
local copy before auditing it:

- what was read: name, split, format, the layout the loader found (``vqa_rad_osf`` for the
  official VQA-RAD release, ``hf_parquet`` for a hub copy ...), root and config version;
- counts: examples, skipped rows by kind, the expected count and whether it matches;
- strata: for every meta field its value counts (or only its number of distinct values when
  there are more than ``MAX_LISTED_VALUES``);
- images: distinct images, questions per image (min, median, max), the missing and corrupt
  images behind the skipped rows, and groups of byte-identical images stored under different
  names (SHA-256, remembered per file version in ``<cache_dir>/digests.sqlite``);
- ROI annotations, when the loader reads any (:mod:`medexp.benchmarks.roi`): how many images
  carry boxes and masks, the box labels, masks whose size differs from their image;
- findings: one sentence per thing a person should look at.

Log lines and errors go to stderr; the exit status is non-zero on any error.
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

MAX_LISTED_VALUES = 30
MAX_LISTED_ITEMS = 20  # missing images, duplicate groups ...: the first ones, in example order
USAGE = """usage: python -m medexp.inspect bench=<name> [bench.root=/path/to/copy] [bench.<field>=<value> ...]

Load a benchmark as `python -m medexp` would and print its counts, strata, image checks and
ROI annotations as JSON.
Example: python -m medexp.inspect bench=vqa_rad bench.root=/data/VQA_RAD"""


def strata(examples) -> dict[str, Any]:
    """Per meta field: value -> count (most common first), or {"n_distinct": k} for many values.

    ROI fields are left out: they describe regions, not strata (see :func:`roi_summary`).
    """
    from medexp.benchmarks.roi import ROI_FIELDS

    counts: dict[str, Counter] = {}
    for example in examples:
        for key, value in example.meta.items():
            if key not in ROI_FIELDS:
                counts.setdefault(key, Counter())[_label(value)] += 1
    return {key: _listed(counter) for key, counter in counts.items()}


def _listed(counter: Counter) -> dict[str, Any]:
    return dict(counter.most_common()) if len(counter) <= MAX_LISTED_VALUES else {"n_distinct": len(counter)}


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def image_summary(benchmark, cache_dir: str | Path) -> dict[str, Any]:
    """Distinct images, questions per image, missing and corrupt images, byte-identical groups."""
    from medexp.benchmarks.images import CORRUPT_IMAGE, MISSING_IMAGE

    per_image = Counter(str(example.image) for example in benchmark.examples if example.image is not None)
    counts = sorted(per_image.values())
    return {
        "n_distinct": len(per_image),
        "questions_per_image": (
            {"min": counts[0], "median": statistics.median(counts), "max": counts[-1]} if counts else None
        ),
        "missing": _image_problems(benchmark.skipped, MISSING_IMAGE),
        "corrupt": _image_problems(benchmark.skipped, CORRUPT_IMAGE),
        "duplicates": duplicate_groups(per_image, cache_dir),
    }


def _image_problems(skipped, kind: str) -> dict[str, Any]:
    """Skipped rows of one kind; rows about the same image share their reason, so reasons count images."""
    reasons = Counter(skip.reason.split(": ", 1)[-1] for skip in skipped if skip.kind == kind)
    return {"n_images": len(reasons), "n_questions": sum(reasons.values()), "images": list(reasons)[:MAX_LISTED_ITEMS]}


def duplicate_groups(per_image: Counter, cache_dir: str | Path) -> dict[str, Any]:
    """Images (paths, in example order) whose bytes are identical, with their question counts."""
    from medexp.benchmarks.digests import DigestCache

    paths = list(per_image)
    by_digest: dict[str, list[str]] = {}
    for path, digest in zip(paths, DigestCache(cache_dir).digests(paths)):
        by_digest.setdefault(digest, []).append(path)
    groups = [
        {"sha256": digest, "images": group, "n_questions": sum(per_image[path] for path in group)}
        for digest, group in by_digest.items()
        if len(group) > 1
    ]
    return {
        "n_groups": len(groups),
        "n_images": sum(len(group["images"]) for group in groups),
        "groups": groups[:MAX_LISTED_ITEMS],
    }


def roi_summary(examples) -> dict[str, Any] | None:
    """What the ROI meta holds, per distinct image; None when the loader reads no ROI fields."""
    from medexp.benchmarks.images import image_size
    from medexp.benchmarks.roi import ROI_BOXES, ROI_FIELDS, ROI_MASK

    if not any(key in example.meta for example in examples for key in ROI_FIELDS):
        return None
    first_meta: dict[Any, dict] = {}
    for example in examples:
        first_meta.setdefault(example.image, example.meta)
    boxes = {image: meta[ROI_BOXES] for image, meta in first_meta.items() if meta.get(ROI_BOXES) is not None}
    masks = {image: meta[ROI_MASK] for image, meta in first_meta.items() if meta.get(ROI_MASK)}
    mismatched = [mask for image, mask in masks.items() if image_size(Path(mask)) != image_size(Path(image))]
    return {
        "n_examples_annotated": sum(example.meta.get(ROI_BOXES) is not None for example in examples),
        "n_images_annotated": len(boxes),
        "n_images_without_annotation": len(first_meta) - len(boxes),
        "n_boxes": sum(len(entries) for entries in boxes.values()),
        "labels": _listed(Counter(entry["label"] for entries in boxes.values() for entry in entries)),
        "n_images_with_mask": len(masks),
        "mask_size_mismatch": {"n_masks": len(mismatched), "masks": mismatched[:MAX_LISTED_ITEMS]},
    }


def findings(summary: dict[str, Any]) -> list[str]:
    """Sentences about what needs a look: the count, skipped rows, duplicates, mask sizes."""
    notes = []
    n, expected = summary["n_examples"], summary["expected_examples"]
    if expected is None:
        notes.append(f"{n} examples; the config states no expected_examples to compare with")
    elif n == expected:
        notes.append(f"{n} examples, as bench.expected_examples says")
    else:
        notes.append(
            f"{n} examples where bench.expected_examples is {expected} ({n - expected:+d}): "
            f"is the copy complete, and are the layout ({summary['layout']}) and split ({summary['split']}) right?"
        )
    images = summary["images"]
    for kind in ("missing", "corrupt"):
        problem = images[kind]
        if problem["n_questions"]:
            notes.append(
                f"{problem['n_questions']} question(s) skipped for {problem['n_images']} {kind} image(s), "
                f"e.g. {problem['images'][0]}"
            )
    duplicates = images["duplicates"]
    if duplicates["n_groups"]:
        notes.append(
            f"{duplicates['n_groups']} group(s) of byte-identical images under different names "
            f"({duplicates['n_images']} files): the same picture is counted as distinct images"
        )
    roi = summary.get("roi")
    if roi and roi["mask_size_mismatch"]["n_masks"]:
        notes.append(f"{roi['mask_size_mismatch']['n_masks']} mask(s) differ in size from their image")
    return notes


def summarize(benchmark, bench_cfg, cache_dir: str | Path) -> dict[str, Any]:
    """The JSON-ready summary of a loaded benchmark and the config it came from."""
    from medexp.config.schemas import BenchFormat

    expected = bench_cfg.get("expected_examples")
    summary = {
        "name": benchmark.name,
        "split": bench_cfg.split,
        "format": BenchFormat(bench_cfg.format).value,
        "layout": benchmark.layout,
        "root": bench_cfg.get("root"),
        "version": bench_cfg.get("version"),
        "n_examples": len(benchmark),
        "n_with_image": sum(example.image is not None for example in benchmark.examples),
        "n_skipped": len(benchmark.skipped),
        "skipped": dict(Counter(skip.kind for skip in benchmark.skipped).most_common()),
        "expected_examples": expected,
        "matches_expected": None if expected is None else len(benchmark) == expected,
        "strata": strata(benchmark.examples),
        "images": image_summary(benchmark, cache_dir),
    }
    roi = roi_summary(benchmark.examples)
    if roi is not None:
        summary["roi"] = roi
    summary["findings"] = findings(summary)
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    overrides = list(sys.argv[1:] if argv is None else argv)
    if not overrides or any(arg in ("-h", "--help") for arg in overrides):
        print(USAGE)
        return 0 if overrides else 2
    if not any(arg.startswith("bench=") for arg in overrides):
        print(f"medexp.inspect: error: name the benchmark with bench=<name>\n{USAGE}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        import medexp  # noqa: F401  (registers the config schemas)
        from medexp.benchmarks import load_benchmark_from_config
        from medexp.config import compose

        cfg = compose(overrides)
        benchmark = load_benchmark_from_config(cfg.bench, cfg.paths.cache_dir)
        summary = summarize(benchmark, cfg.bench, cfg.paths.cache_dir)
    except Exception as error:  # any failure becomes one readable line and a non-zero status
        print(f"medexp.inspect: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
