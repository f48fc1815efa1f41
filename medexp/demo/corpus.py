"""The demo reference corpus for ``image_nn``: synthetic scans with planted near-duplicates.

One directory, in the generic ``local`` format, holds two splits:

- ``corpus``: fresh scans from the demo renderer (same distribution as the benchmark, other
  "patients") mixed with copies of a seeded subset of demo *test* images. Every corpus image,
  planted or not, goes through the same perturbation (resized, brightness-shifted, JPEG
  re-encoded), so only provenance tells them apart. A planted row records the test example it
  copies in ``duplicate_of`` (``"test::<id>"``, the suffix of its benchmark example id): the
  ground truth the detector should recover.
- ``ood``: colourful non-medical pictures (painting-like shapes on gradients), the out-of-domain
  control that a calibrated detector should flag at about zero.

Rows carry ``question``/``answer`` only because the local format requires them; a corpus has
no questions, so both are empty.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from medexp.demo.directory import build_once, read_manifest

GENERATOR_VERSION = "demo-corpus-v1"
# Near-duplicate strength. Stronger settings (down to 0.6x, +-24 levels, quality 55) push some
# copies of the very uniform synthetic MRIs beyond the 1% tail of scan-to-scan distances.
SCALE_RANGE = (0.75, 1.5)  # resize factor of every corpus image
SHIFT_RANGE = (4, 12)  # absolute brightness shift in grey levels, either sign
QUALITY_RANGE = (75, 95)  # JPEG quality, inclusive


def write_corpus(
    root: Path, bench_root: Path, n_distractors: int = 1600, n_planted: int = 100, n_ood: int = 300, seed: int = 20261122
) -> Path:
    """Write the corpus and ood splits into ``root`` (atomically, once); return ``root``.

    ``bench_root`` is a demo benchmark written by :func:`medexp.demo.benchmark.write_benchmark`;
    planted copies are drawn from its test split.
    """
    bench_manifest = read_manifest(bench_root)
    if bench_manifest is None or "test.jsonl" not in bench_manifest.get("sha256", {}):
        raise FileNotFoundError(f"{bench_root} is not a complete demo benchmark (no manifest with test.jsonl)")
    test_rows = [json.loads(line) for line in (bench_root / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    if not 0 <= n_planted <= len(test_rows):
        raise ValueError(f"n_planted must be between 0 and the {len(test_rows)} test images, got {n_planted}")
    if n_distractors + n_planted < 2:
        raise ValueError("a corpus needs at least two images (n_distractors + n_planted >= 2)")
    counts = {"distractors": n_distractors, "planted": n_planted, "ood": n_ood}
    identity = {
        "generator": GENERATOR_VERSION,
        "seed": seed,
        "counts": counts,
        "bench_test_sha256": bench_manifest["sha256"]["test.jsonl"],  # the images it copies
    }

    def write_into(directory: Path) -> None:
        (directory / "images").mkdir()
        distractor_rng, planted_rng, ood_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
        corpus = _corpus_rows(directory, bench_root, test_rows, n_distractors, n_planted, distractor_rng, planted_rng)
        _write_jsonl(directory / "corpus.jsonl", corpus)
        _write_jsonl(directory / "ood.jsonl", [_ood_row(directory, k, ood_rng) for k in range(n_ood)])

    return build_once(Path(root), identity, sum(counts.values()), write_into)


def perturb(image, rng: np.random.Generator) -> tuple[bytes, dict[str, Any]]:
    """Resize, brightness-shift and JPEG re-encode a grey image; return the JPEG and what was done."""
    from PIL import Image

    scale = float(rng.uniform(*SCALE_RANGE))
    side = max(16, round(image.width * scale))
    shift = int(rng.integers(SHIFT_RANGE[0], SHIFT_RANGE[1] + 1)) * (1 if rng.random() < 0.5 else -1)
    quality = int(rng.integers(QUALITY_RANGE[0], QUALITY_RANGE[1] + 1))
    resized = np.asarray(image.convert("L").resize((side, side), Image.Resampling.BICUBIC), dtype=np.int16)
    shifted = Image.fromarray(np.clip(resized + shift, 0, 255).astype(np.uint8))
    buffer = io.BytesIO()
    shifted.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue(), {"size": side, "brightness_shift": shift, "jpeg_quality": quality}


def _corpus_rows(
    directory: Path,
    bench_root: Path,
    test_rows: list[dict[str, Any]],
    n_distractors: int,
    n_planted: int,
    distractor_rng: np.random.Generator,
    planted_rng: np.random.Generator,
) -> list[dict[str, Any]]:
    from PIL import Image

    from medexp.demo.benchmark import IMAGE_SIZE, generate_records
    from medexp.demo.scans import ScanSpec, render_scan

    sources: list[tuple[Any, dict[str, Any]]] = []
    spec_seed = int(distractor_rng.integers(2**31 - 1))
    for record in generate_records(n_distractors, spec_seed, "corpus"):
        image = render_scan(ScanSpec(**record["scan"]), IMAGE_SIZE)
        fields = {"kind": "distractor", "duplicate_of": None, "modality": record["modality"], "organ": record["organ"]}
        sources.append((image, fields))
    for index in np.sort(planted_rng.choice(len(test_rows), size=n_planted, replace=False)):
        row = test_rows[int(index)]
        with Image.open(bench_root / row["image"]) as opened:
            image = opened.convert("L")
        truth = {"kind": "planted", "duplicate_of": f"test::{row['id']}"}
        sources.append((image, {**truth, "modality": row["modality"], "organ": row["organ"]}))
    rows = []
    # shuffled so that position in the corpus says nothing about provenance
    for k, source in enumerate(planted_rng.permutation(len(sources))):
        image, fields = sources[int(source)]
        jpeg, applied = perturb(image, planted_rng)
        name = f"images/corpus_{k:05d}.jpg"
        (directory / name).write_bytes(jpeg)
        rows.append({"id": f"c{k:05d}", "image": name, "question": "", "answer": "", **fields, **applied})
    return rows


def _ood_row(directory: Path, k: int, rng: np.random.Generator) -> dict[str, Any]:
    name = f"images/ood_{k:05d}.png"
    buffer = io.BytesIO()
    _painting(rng).save(buffer, format="PNG")
    (directory / name).write_bytes(buffer.getvalue())
    return {"id": f"o{k:05d}", "image": name, "question": "What does this picture show?", "answer": "a painting", "kind": "ood"}


def _painting(rng: np.random.Generator):
    """A colourful abstract picture: a two-colour gradient under random brush-like shapes."""
    from PIL import Image, ImageDraw, ImageFilter

    side = int(rng.integers(96, 161))
    start, stop = rng.integers(0, 256, size=(2, 3))
    angle = rng.uniform(0.0, 2.0 * np.pi)
    u = np.linspace(0.0, 1.0, side)
    ramp = np.clip(0.5 + (u[None, :] - 0.5) * np.cos(angle) + (u[:, None] - 0.5) * np.sin(angle), 0.0, 1.0)
    canvas = (start[None, None, :] * (1.0 - ramp[..., None]) + stop[None, None, :] * ramp[..., None]).astype(np.uint8)
    image = Image.fromarray(canvas, mode="RGB")
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(6, 15))):
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        x0, y0 = (int(v) for v in rng.integers(-side // 4, side, size=2))
        width, height = (int(v) for v in rng.integers(side // 10, side // 2, size=2))
        box = (x0, y0, x0 + width, y0 + height)
        shape = int(rng.integers(4))
        if shape == 0:
            draw.ellipse(box, fill=colour)
        elif shape == 1:
            draw.rectangle(box, fill=colour)
        elif shape == 2:
            points = [tuple(int(v) for v in rng.integers(0, side, size=2)) for _ in range(int(rng.integers(3, 7)))]
            draw.polygon(points, fill=colour)
        else:
            draw.line(box, fill=colour, width=int(rng.integers(2, 9)))
    return image.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(0.5, 1.5))))


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path.write_text(text, encoding="utf-8")
