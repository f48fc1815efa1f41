"""The generic ``local`` format: ``<root>/<split>.jsonl`` with image paths relative to root.

Each line holds ``id``, ``question``, ``answer``, optional ``image`` and ``options``; every other
key goes to ``meta``. A new benchmark in this format needs only a YAML file in conf/bench/.
"""

from __future__ import annotations

import json
from pathlib import Path

from medexp.benchmarks.base import Benchmark, Example, SkippedExample

_REQUIRED = ("id", "question", "answer")
_RESERVED = ("id", "question", "answer", "image", "options")


def load_local(name: str, root: Path, split: str, max_examples: int | None = None) -> Benchmark:
    path = Path(root) / f"{split}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"benchmark {name!r}: no {split}.jsonl under {root} (expected {path})")
    examples: list[Example] = []
    skipped: list[SkippedExample] = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            if max_examples is not None and len(examples) >= max_examples:
                break
            row = json.loads(line)
            missing = [key for key in _REQUIRED if key not in row]
            if missing:
                raise ValueError(f"{path}:{line_number}: missing field(s) {missing}")
            example_id = f"{name}::{split}::{row['id']}"
            image = Path(root) / row["image"] if row.get("image") else None
            problem = image_problem(image) if image is not None else None
            if problem:
                skipped.append(SkippedExample(example_id, problem))
                continue
            options = tuple(row["options"]) if row.get("options") else None
            meta = {key: value for key, value in row.items() if key not in _RESERVED}
            examples.append(
                Example(
                    example_id=example_id,
                    position=len(examples),
                    image=image,
                    question=str(row["question"]),
                    answer=str(row["answer"]),
                    options=options,
                    meta=meta,
                )
            )
    return Benchmark(name=name, examples=examples, skipped=skipped)


def image_problem(path: Path) -> str | None:
    """Why an image cannot be used (missing or undecodable), or None when it is fine."""
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        return f"missing image {path}"
    try:
        with Image.open(path) as image:
            image.verify()  # structure and checksums
        with Image.open(path) as image:
            image.load()  # full decode: verify() does not decode JPEG data
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        return f"corrupt image {path}: {error}"
    return None
