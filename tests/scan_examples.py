"""Question-answer examples on rendered scans, for the scorer tests on tiny random-weight models."""

from __future__ import annotations

from pathlib import Path

from medexp.benchmarks.base import Example
from medexp.demo.scans import ScanSpec, png_bytes, render_scan

QA = [
    # (question, answer, scan) -- answers of very different token lengths so that batches pad
    ("What modality is this scan?", "CT", ScanSpec("CT", "brain", seed=1)),
    ("Is there a lesion?", "yes", ScanSpec("MRI", "liver", lesion=True, lesion_side="left", lesion_count=1, seed=2)),
    ("Which organ is shown?", "the left kidney, seen from the front", ScanSpec("X-Ray", "kidney", seed=3)),
    ("How many lesions are visible in the upper part of the organ?", "two",
     ScanSpec("Ultrasound", "lung", lesion=True, lesion_side="upper", lesion_count=2, seed=4)),
    ("Where is the lesion?", "on the right side of the heart",
     ScanSpec("CT", "heart", lesion=True, lesion_side="right", lesion_count=1, seed=5)),
    ("Is this an MRI?", "no", ScanSpec("CT", "lung", seed=6)),
    ("What organ is imaged here, and what is its state?", "brain, normal", ScanSpec("MRI", "brain", seed=7)),
]
TEXT_ONLY = [
    ("Which modality uses sound waves?", "ultrasound"),
    ("Name the organ that filters blood.", "the kidney filters blood"),
    ("Is a CT scan an X-ray technique?", "yes"),
]


def write_examples(root: Path, qa=QA, text_only=TEXT_ONLY) -> tuple[list[Example], list[Example]]:
    """(image examples, text-only examples), with 32 px scans written under ``root``."""
    images = []
    for i, (question, answer, spec) in enumerate(qa):
        path = root / f"scan{i}.png"
        path.write_bytes(png_bytes(render_scan(spec, size=32)))
        images.append(Example(f"t::test::img{i}", i, path, question, answer))
    texts = [Example(f"t::test::txt{i}", len(qa) + i, None, q, a) for i, (q, a) in enumerate(text_only)]
    return images, texts
