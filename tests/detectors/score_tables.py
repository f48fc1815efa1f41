"""Drawn per-example score tables (the columns medexp.scoring.example_scores writes, plus the gold
answer) for the dataset-level membership tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from medexp.config.schemas import CodecConfig, DatasetInferenceConfig

WORDS = np.array(["left", "right", "lung", "liver", "mass", "nodule", "normal", "yes", "no", "ct", "mri", "x-ray"])


def dataset_inference_config(**overrides):
    return OmegaConf.structured(DatasetInferenceConfig(name="dataset_inference", family="dataset_inference", **overrides))


def codec_config(**overrides):
    return OmegaConf.structured(CodecConfig(name="codec", family="codec", **overrides))


def score_table(rng: np.random.Generator, n: int, prefix: str, confidence: float = 0.0) -> pd.DataFrame:
    """n examples of 1-6 answer tokens; token log p = -Exponential(difficulty) shrunk towards 0 by
    exp(-confidence) (a model that saw the examples is surer of them), z values shifted up by
    ``confidence``; each example's difficulty is drawn, so the examples differ as real ones do."""
    rows = []
    for index in range(n):
        length = int(rng.integers(1, 7))
        difficulty = rng.exponential(1.0)
        logprobs = -rng.exponential(difficulty, size=length) * np.exp(-confidence)
        z = rng.normal(confidence, 1.0, size=length)
        rows.append({
            "example_id": f"{prefix}{index}",
            "position": index,
            "n_answer_tokens": length,
            "token_logprobs": logprobs.tolist(),
            "token_minkpp_z": z.tolist(),
            "sum_logprob": float(logprobs.sum()),
            "mean_logprob": float(logprobs.mean()),
            "answer": " ".join(rng.choice(WORDS, size=length)),
        })
    return pd.DataFrame(rows)
