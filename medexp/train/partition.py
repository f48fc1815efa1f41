"""The train / canary / test partition of a dataset (Algorithm 1, line 1 of the audit).

Stratified by class (scikit-learn's ``train_test_split``: first the train part, then the rest
into canary and test) and seeded by ``partition.seed``, not by the training seed, so every
replicate pair scores the same canaries. The examples are taken in example-id order first, so
the partition does not depend on the order a loader or a control produced.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from medexp.benchmarks.base import Example


@dataclass(frozen=True)
class Partition:
    """Example ids of each part, sorted."""

    train: tuple[str, ...]
    canary: tuple[str, ...]
    test: tuple[str, ...]

    def as_dict(self) -> dict[str, list[str]]:
        return {"train": list(self.train), "canary": list(self.canary), "test": list(self.test)}


def partition_examples(examples: Sequence[Example], cfg) -> Partition:
    """Split ``examples`` by ``cfg`` (a ``PartitionConfig``); the class of an example is its answer."""
    from sklearn.model_selection import train_test_split

    fractions = {"train": float(cfg.train), "canary": float(cfg.canary), "test": float(cfg.test)}
    if any(value < 0 for value in fractions.values()) or not math.isclose(sum(fractions.values()), 1.0, abs_tol=1e-6):
        raise ValueError(f"partition fractions must be >= 0 and sum to 1, got {fractions}")
    if fractions["train"] <= 0:
        raise ValueError(f"partition.train must be > 0, got {fractions['train']}")
    ordered = sorted(examples, key=lambda example: example.example_id)
    ids = [example.example_id for example in ordered]
    labels = [example.answer for example in ordered]
    rest_share = fractions["canary"] + fractions["test"]
    if rest_share == 0:
        return Partition(tuple(ids), (), ())
    try:
        train, rest, _, rest_labels = train_test_split(
            ids, labels, test_size=rest_share, stratify=labels if cfg.stratify else None, random_state=cfg.seed
        )
        if fractions["canary"] == 0 or fractions["test"] == 0:
            canary, test = (rest, []) if fractions["test"] == 0 else ([], rest)
        else:
            canary, test = train_test_split(
                rest, test_size=fractions["test"] / rest_share,
                stratify=rest_labels if cfg.stratify else None, random_state=cfg.seed + 1,
            )
    except ValueError as error:
        counts = dict(sorted(Counter(labels).items()))
        raise ValueError(f"cannot partition {len(ids)} examples {fractions} (stratify={cfg.stratify}): {error}. "
                         f"Class counts: {counts}; a stratified split needs each class in every part, "
                         "or set partition.stratify=false") from error
    return Partition(tuple(sorted(train)), tuple(sorted(canary)), tuple(sorted(test)))
