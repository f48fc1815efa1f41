"""Side-by-side adjudication panels: a flagged benchmark image next to its nearest corpus image."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np


def adjudication_panel(benchmark_image: Path, corpus_image: Path, benchmark_id: str, corpus_id: str, distance: float,
                       match: str = "near"):
    """A matplotlib Figure showing both images at their own resolution, titled with ids and distance
    (or, for an exact duplicate, how it matched: ``same_bytes`` or ``same_vector``)."""
    from matplotlib.figure import Figure

    from medexp.benchmarks.images import read_image

    figure = Figure(figsize=(7.0, 3.9), layout="constrained")
    for column, (path, label) in enumerate(((benchmark_image, f"benchmark\n{benchmark_id}"), (corpus_image, f"corpus\n{corpus_id}"))):
        axes = figure.add_subplot(1, 2, column + 1)
        pixels = np.asarray(read_image(path, "RGB"))
        axes.imshow(pixels, interpolation="nearest")
        axes.set_title(f"{label}\n{pixels.shape[1]}x{pixels.shape[0]} px", fontsize=8)
        axes.set_axis_off()
    exact = f"exact duplicate ({match.replace('_', ' ')}), " if distance == 0.0 else ""
    figure.suptitle(f"{exact}cosine distance {distance:.4g}", fontsize=9)
    return figure


def panel_name(rank: int, example_id: str) -> str:
    """A file stem for the rank-th closest flagged pair: ``adjudication/003_slake_test_11934``."""
    return f"adjudication/{rank:03d}_{re.sub(r'[^A-Za-z0-9._-]+', '_', example_id)}"
