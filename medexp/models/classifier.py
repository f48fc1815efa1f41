"""Scorer adapter for transformers image classifiers (``AutoModelForImageClassification``:
ViT, ResNet, ConvNeXt, ... from the hub, a local directory or ``medexp.train``).

A classifier's "answer" is its class: the example's answer must be one of the model's labels
(``config.label2id``). Its score-table row fills the columns of a VLM's row with one "token",
the class: ``token_logprobs`` holds log p(label | image), ``token_minkpp_z`` its Min-K%++ z
over the classes, and the sums and means equal that one value. So the score cache, the
controls and the detectors read a classifier as they read a VLM, and its loss (the mean
negative log-likelihood per answer token) is the cross-entropy of the label.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from medexp.benchmarks.base import Example
from medexp.models.hf import CheckpointScorer


class ImageClassifierScorer(CheckpointScorer):
    PROCESSOR_CLASS = "AutoImageProcessor"
    MODEL_CLASS = "AutoModelForImageClassification"

    def __init__(self, model_cfg, location: str):
        super().__init__(model_cfg, location)
        self.label_ids = {str(label): int(index) for label, index in self.model.config.label2id.items()}

    def score_examples(self, examples: Sequence[Example]) -> pd.DataFrame:
        """One row per example: log p and Min-K%++ z of its label, one forward pass on the image."""
        import torch

        from medexp.benchmarks.images import read_image
        from medexp.scoring.teacher_forcing import label_scores

        targets = [self._label_id(example) for example in examples]
        rows: list[dict[str, Any]] = []
        size = int(self.cfg.batch_size)
        for start in range(0, len(examples), size):
            batch = examples[start : start + size]
            pixels = self.processor(images=[read_image(ex.image, "RGB") for ex in batch], return_tensors="pt")
            inputs = {key: value.to(self.device) for key, value in pixels.items()}
            with torch.inference_mode():
                logits = self.model(**inputs).logits
            logprob, z = label_scores(logits, torch.tensor(targets[start : start + size], device=logits.device))
            for example, value, score in zip(batch, logprob.cpu().numpy(), z.cpu().numpy()):
                rows.append({
                    "example_id": example.example_id,
                    "position": example.position,
                    "n_answer_tokens": 1,
                    "token_logprobs": [float(value)],
                    "token_minkpp_z": [float(score)],
                    "sum_logprob": float(value),
                    "mean_logprob": float(value),
                    "boundary_merged": False,
                })
        return pd.DataFrame(rows)

    def score_texts(self, texts: Sequence[str], context_length: int, stride: int, batch_size: int) -> np.ndarray:
        raise ValueError(f"model={self.cfg.name} is an image classifier: it has no language model to score "
                         "text, so the exchangeability test (detector exch) does not apply to it")

    def _label_id(self, example: Example) -> int:
        if example.image is None:
            raise ValueError(f"{example.example_id}: an image classifier needs an image, the example has none")
        if example.answer not in self.label_ids:
            raise ValueError(f"{example.example_id}: class {example.answer!r} is not a label of model={self.cfg.name} "
                             f"(its labels: {sorted(self.label_ids)})")
        return self.label_ids[example.answer]
