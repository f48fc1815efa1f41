"""The content of a benchmark as a consumer reads it, hashed (DESIGN.md, "Integrity").

The hash covers the ordered example ids, questions, answers, options and each image's bytes
(SHA-256, through :class:`~medexp.benchmarks.digests.DigestCache`), never an image's path: a
replaced image or an edited file changes it, a moved copy of the same files does not.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from medexp.benchmarks.base import Example
from medexp.benchmarks.digests import DigestCache


def image_digests(examples: Sequence[Example], cache_dir: str | Path) -> list[str | None]:
    """The SHA-256 of each example's image bytes (None for a text-only example), in order."""
    with_image = [example.image for example in examples if example.image is not None]
    digests = iter(DigestCache(cache_dir).digests(with_image))
    return [next(digests) if example.image is not None else None for example in examples]


def content_hash(examples: Sequence[Example], cache_dir: str | Path, with_images: bool = True) -> str:
    """Hash of the ordered benchmark content; ``with_images=False`` for consumers that read text only."""
    digests = image_digests(examples, cache_dir) if with_images else [None] * len(examples)
    digest = hashlib.sha256()
    for example, image in zip(examples, digests):
        record = [example.example_id, example.question, example.answer,
                  list(example.options) if example.options is not None else None, image]
        digest.update(json.dumps(record, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()[:32]
