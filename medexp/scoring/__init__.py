"""Score tables: what the detectors consume, computed once per key and cached as parquet.

* example scores: one row per example (teacher-forced gold-answer log-probs, Min-K%++ z);
* shard-order scores: for the exchangeability test, the log-likelihood of each shard of the
  benchmark rendered as text, in the order under test (permutation 0) and in random orders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from medexp.benchmarks.base import Example
from medexp.scoring.cache import ScoreCache

EXAMPLE_SHARD = 256  # examples per cached shard of an example-score table
# Part of every score table's key. Bump when a change alters any score (a scorer's prompt, its
# tokenisation, the teacher forcing), so cached tables are recomputed.
# v2: prompts from a chat template are tokenised without the tokenizer's own special tokens.
SCORING_VERSION = "scoring-v2"


def example_scores(scorer, model_key, examples: Sequence[Example], cache_dir: str | Path) -> pd.DataFrame:
    """Per-example score table (in the order of ``examples``), cached under a content key."""
    from medexp.benchmarks.content import content_hash

    examples = list(examples)
    key = {"table": "example_scores", "version": SCORING_VERSION, "model": model_key,
           "benchmark": content_hash(examples, cache_dir)}

    def compute(start: int, stop: int) -> pd.DataFrame:
        return scorer().score_examples(examples[start:stop])

    table = ScoreCache(Path(cache_dir) / "scores").get_or_compute(
        key, [ex.example_id for ex in examples], "example_id", EXAMPLE_SHARD, compute, desc="scoring examples"
    )
    _check_finite(table, "sum_logprob")
    return table


def shard_orders(n_examples: int, shards: int, permutations: int, seed: int) -> list[list[np.ndarray]]:
    """For each contiguous shard: the identity order followed by ``permutations`` random orders.

    Shard sizes differ by at most one example (numpy.array_split); orders are drawn from a
    generator seeded by ``seed`` so the whole test reproduces exactly.
    """
    if shards < 2 or shards > n_examples:
        raise ValueError(f"exch needs 2 <= shards <= number of examples ({n_examples}), got {shards}")
    rng = np.random.default_rng(seed)
    result = []
    for block in np.array_split(np.arange(n_examples), shards):
        orders = [np.arange(block.size)] + [rng.permutation(block.size) for _ in range(permutations)]
        result.append(orders)
    return result


def shard_order_scores(
    scorer: Callable, model_key, examples: Sequence[Example], cache_dir: str | Path, cfg, seed: int
) -> pd.DataFrame:
    """Long table (shard, permutation, loglik); permutation 0 is the order under test."""
    from medexp.benchmarks.content import content_hash

    examples = list(examples)
    texts = [cfg.text_template.format(question=ex.question, answer=ex.answer) for ex in examples]
    orders = shard_orders(len(examples), cfg.shards, cfg.permutations, seed)
    blocks = np.array_split(np.arange(len(examples)), cfg.shards)
    # The test reads the examples as text only: their images do not enter the key.
    key = {"table": "shard_order_scores", "version": SCORING_VERSION, "model": model_key,
           "benchmark": content_hash(examples, cache_dir, with_images=False), "template": cfg.text_template, "shards": cfg.shards,
           "permutations": cfg.permutations, "seed": seed, "context": [cfg.context_length, cfg.stride]}

    def compute(start: int, stop: int) -> pd.DataFrame:
        frames = []
        for shard in range(start, stop):
            block = blocks[shard]
            joined = ["".join(texts[block[i]] for i in order) for order in orders[shard]]
            loglik = scorer().score_texts(joined, cfg.context_length, cfg.stride, cfg.batch_size)
            frames.append(pd.DataFrame({"shard": shard, "permutation": np.arange(len(joined)), "loglik": loglik}))
        return pd.concat(frames, ignore_index=True)

    # Each cached shard of this table holds one benchmark shard's rows.
    table = ScoreCache(Path(cache_dir) / "scores").get_or_compute(
        key, [str(shard) for shard in range(cfg.shards)], "shard", 1, compute, desc="scoring shard orders",
        rows_per_item=cfg.permutations + 1,
    )
    _check_finite(table, "loglik")
    return table


def _check_finite(table: pd.DataFrame, column: str) -> None:
    bad = int((~np.isfinite(table[column].to_numpy(dtype=np.float64))).sum())
    if bad:
        raise ValueError(f"{bad} of {len(table)} rows have a NaN or infinite {column}; the model's scores are unusable")
