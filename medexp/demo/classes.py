"""The ``demo_classes`` classification sets: demo scans labelled by a finding.

* ``labels="finding"``: the class is the number of lesions (``normal``, ``one_lesion``,
  ``two_lesions``, ``three_lesions``), the side drawn freely. The classifier must count small
  blobs on any modality and organ: hard enough at 32 pixels that a small ViT generalises only
  in part and memorises some of what it sees, which the memorization detectors need.
* ``labels="side"``: the class is where the lesions sit (``normal``, ``left``, ``right``,
  ``upper``, ``lower``), the count drawn freely: another task on the same kind of image, on
  which the demo's "foundation" backbone is pretrained before it is fine-tuned on findings.

Written in the ``image_folder`` layout, ``<root>/images/all/<class>/<k>.png``, plus
``labels.jsonl`` with each image's scan spec (the ground truth), atomically like every demo set.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from medexp.demo.directory import build_once
from medexp.demo.scans import MODALITIES, ORGANS, SIDES, ScanSpec, png_bytes, render_scan

GENERATOR_VERSION = "demo-classes-v1"
IMAGE_SIZE = 96
SPLIT = "all"  # one split: medexp.train partitions it into train, canary and test
LESION_COUNT = {"normal": 0, "one_lesion": 1, "two_lesions": 2, "three_lesions": 3}
CLASSES = {"finding": tuple(LESION_COUNT), "side": ("normal", *SIDES)}
DEFAULT_WEIGHTS = {
    "finding": {"normal": 0.55, "one_lesion": 0.25, "two_lesions": 0.14, "three_lesions": 0.06},
    "side": {"normal": 0.4, **{side: 0.15 for side in SIDES}},
}


def write_classes(root: Path, labels: str, n_images: int, class_weights: dict[str, float] | None, seed: int) -> Path:
    """Write the set these settings describe into ``root`` once; return ``root``."""
    if labels not in CLASSES:
        raise ValueError(f"demo_classes.labels must be one of {list(CLASSES)}, got {labels!r}")
    chosen = DEFAULT_WEIGHTS[labels] if class_weights is None else class_weights
    weights = {str(label): float(weight) for label, weight in chosen.items()}
    unknown = sorted(set(weights) - set(CLASSES[labels]))
    if unknown or not weights:
        raise ValueError(f"demo_classes.class_weights: unknown class(es) {unknown}; the {labels} classes are "
                         f"{list(CLASSES[labels])}")
    if any(weight <= 0 for weight in weights.values()):
        raise ValueError(f"demo_classes.class_weights must be positive, got {weights}")
    if n_images < len(weights):
        raise ValueError(f"demo_classes.n_images must be at least the number of classes ({len(weights)}), got {n_images}")
    identity = {"generator": GENERATOR_VERSION, "labels": labels, "seed": seed, "n_images": n_images,
                "class_weights": weights, "image_size": IMAGE_SIZE}
    return build_once(Path(root), identity, n_images, lambda tmp: _write_into(tmp, labels, n_images, weights, seed))


def _write_into(directory: Path, labels_kind: str, n_images: int, weights: dict[str, float], seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = sorted(weights)
    probabilities = np.array([weights[label] for label in labels]) / sum(weights.values())
    for label in labels:
        (directory / "images" / SPLIT / label).mkdir(parents=True)
    lines = []
    for k in range(n_images):
        label = labels[int(rng.choice(len(labels), p=probabilities))]
        modality = MODALITIES[int(rng.integers(len(MODALITIES)))]
        organ = ORGANS[int(rng.integers(len(ORGANS)))]
        if labels_kind == "finding":
            count = LESION_COUNT[label]
            side = SIDES[int(rng.integers(len(SIDES)))] if count else None
        else:
            side = None if label == "normal" else label
            count = 0 if side is None else 1 + int(rng.integers(3))
        spec = ScanSpec(modality, organ, count > 0, side, count, seed=int(rng.integers(2**31 - 1)))
        name = f"images/{SPLIT}/{label}/{k:05d}.png"
        (directory / name).write_bytes(png_bytes(render_scan(spec, IMAGE_SIZE)))
        lines.append(json.dumps({"id": f"{k:05d}", "image": name, "label": label, "scan": asdict(spec)}) + "\n")
    (directory / "labels.jsonl").write_bytes("".join(lines).encode("utf-8"))
