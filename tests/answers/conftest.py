"""Fixtures of the answering layer: probes with real image files, a scripted chat server."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from medexp.benchmarks.base import UPSTREAM_ID
from medexp.config.schemas import AnswerConfig
from medexp.probes import Probe
from medexp.probes.choice import EXAMPLE_META
from tests.answers.server import ChatServer

OPTIONS = ("Pneumonia", "Pleural effusion", "Normal chest", "Cardiomegaly")


def choice_probe(example_id: str = "ex1", kind: str = "original", options=OPTIONS, gold: str = "B",
                 question: str = "What does the radiograph show?", image: Optional[Path] = None,
                 variant: Optional[str] = None, **extra) -> Probe:
    probe_id = f"{example_id}::{kind}" + (f"::{variant}" if variant else "")
    return Probe(probe_id=probe_id, example_id=example_id, kind=kind, question=question, gold=gold,
                 image=image, options=tuple(options), **extra)


def text_probe(example_id: str = "ex1", kind: str = "slot_mask", gold: str = "effusion",
               question: str = "Fill in the [MASK]: a left pleural [MASK].", image: Optional[Path] = None,
               upstream=None) -> Probe:
    """A free-text probe; ``upstream``: the release's id of its example, kept as the probe makers keep it."""
    return Probe(probe_id=f"{example_id}::{kind}", example_id=example_id, kind=kind, question=question, gold=gold,
                 image=image, meta=released_as(upstream))


def released_as(upstream) -> dict:
    """A probe's meta holding its example's release id as probes made from examples do (none: empty)."""
    return {} if upstream is None else {EXAMPLE_META: {UPSTREAM_ID: upstream}}


def write_png(path: Path, seed: int = 0, size: int = 8) -> Path:
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


@pytest.fixture()
def answer_cfg() -> AnswerConfig:
    return AnswerConfig()


@pytest.fixture()
def chat_server():
    """A started :class:`ChatServer` (set ``answer``, ``latency``, faults on it in the test)."""
    with ChatServer() as server:
        yield server


@pytest.fixture()
def demo_export(demo_cache, tmp_path):
    """``export(fmt, detector, *overrides, out=None)``: python -m medexp.export of a small demo cell
    (into ``out``, else a folder of its own); its folder."""
    from medexp.export import main as export_main

    def export(fmt: str, detector: str = "option_order", *overrides: str, out: Optional[Path] = None) -> Path:
        out = out or tmp_path / f"{fmt}-{detector}-{len(overrides)}"
        status = export_main([f"paths.cache_dir={demo_cache}", "bench.max_examples=6", f"detector={detector}",
                              f"format={fmt}", f"out={out}", *overrides])
        assert status == 0
        return out

    return export
