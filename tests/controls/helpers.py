"""Hand-built examples, score tables and a fake scorer for the control tests."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
from omegaconf import OmegaConf
from PIL import Image

from medexp.benchmarks.base import Example


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


IMAGE_DIR = Path(tempfile.gettempdir()) / "medexp-control-test-images"


def image_of(example_id: str) -> Path:
    """A small PNG of its own colour per example id (score-cache keys read image bytes)."""
    path = IMAGE_DIR / f"{sha1(example_id)}.png"
    if not path.exists():
        IMAGE_DIR.mkdir(parents=True, exist_ok=True)
        colour = tuple(bytes.fromhex(sha1(example_id)[:6]))
        staging = path.with_suffix(f".{os.getpid()}.tmp")
        Image.new("RGB", (4, 4), colour).save(staging, format="PNG")
        os.replace(staging, path)
    return path


def examples(ids: list[str], with_images: bool = True) -> list[Example]:
    """Examples in released order (position = index), each with an image unless told not to."""
    return [
        Example(example_id, position, image_of(example_id) if with_images else None, f"q {example_id}", "a")
        for position, example_id in enumerate(ids)
    ]


class FakeScorer:
    """Scores examples from fixed per-id rows; records what it was asked to score.

    ``rows[example_id]`` = (answer token count, Min-K%++ z values); the log-prob is -1 per
    token, minus 5 when the example has an image, so imaged and blind scores differ.
    """

    def __init__(self, rows: dict[str, tuple[int, list[float]]]):
        self.rows = rows
        self.calls: list[list[Example]] = []

    def score_examples(self, batch) -> pd.DataFrame:
        self.calls.append(list(batch))
        records = []
        for example in batch:
            n_tokens, z_values = self.rows[example.example_id]
            logprob = -1.0 * n_tokens - (5.0 if example.image is not None else 0.0)
            records.append({
                "example_id": example.example_id,
                "position": example.position,
                "n_answer_tokens": n_tokens,
                "token_logprobs": [logprob / n_tokens] * n_tokens,
                "token_minkpp_z": list(map(float, z_values)),
                "sum_logprob": logprob,
                "mean_logprob": logprob / n_tokens,
                "boundary_merged": False,
            })
        return pd.DataFrame(records)


def fake_context(control: dict, released: list[Example], scorer: FakeScorer, cache_dir: Path):
    """The values a cell hands a control (its control config, the released examples and the cell
    model's cached scores of examples), and the scorer behind them."""
    from medexp.scoring import example_scores

    cfg = OmegaConf.create({"control": control})
    key = {"model": "fake"}
    return SimpleNamespace(cfg=cfg, examples=released, scorer=lambda: scorer, model_key=key, cache_dir=cache_dir,
                           example_scores=lambda examples: example_scores(lambda: scorer, key, examples, cache_dir))


def spearman_by_hand(positions) -> float:
    """1 - 6 sum d^2 / (n (n^2 - 1)) for distinct positions against place 0..n-1."""
    ranks = np.argsort(np.argsort(positions))
    d = ranks - np.arange(len(positions))
    n = len(positions)
    return 1 - 6 * float(np.sum(d**2)) / (n * (n**2 - 1))
