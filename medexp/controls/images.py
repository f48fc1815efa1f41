"""Image controls: score without the image (``blind_image``), or replace the benchmark's images
by an out-of-domain image set (``negative_images``, controlled audit section 3.6)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from medexp.benchmarks.base import Benchmark, Example


def without_images(examples: Sequence[Example]) -> list[Example]:
    """The examples with ``image=None``: the scorer then scores the question and answer alone.

    The score-cache key hashes each example's image path, so these scores never mix with the
    imaged ones.
    """
    return [dataclasses.replace(example, image=None) for example in examples]


def negative_image_set(control_cfg, cache_dir: str | Path) -> Benchmark:
    """The control's out-of-domain image set (``control.images``, a bench config), loaded with
    the benchmark loaders; image_nn matches it against the cell's corpus at the cell's tau."""
    from medexp.benchmarks import load_benchmark_from_config

    images = control_cfg.images.copy()
    images.image_only = True  # pictures without questions are what this set is
    benchmark = load_benchmark_from_config(images, cache_dir)
    if not any(example.image is not None for example in benchmark.examples):
        raise ValueError(f"control={control_cfg.name}: the image set {images.name!r} has no images")
    return benchmark
