"""Control ``synthetic``: a cohort's scores drawn from the calibration model instead of models.

Every cohort member m of ``control.cohort`` (gain g_m, offset b_m, contaminated_fraction) gets
the score s_im = g_m e_i + b_m + eps_im + delta_im on each example of a synthetic benchmark
(``bench=synthetic``, whose examples carry the easiness e_i), written as a one-token score
table so the cohort detectors (mink_tail, topk_jaccard, loss) run on it unchanged. The cell's
model (``model.name``) is the target; ``detector.cohort`` is ignored, the cohort is the
control's.

One world per simulation: a model's draws come from a stream named by the *world seed* and the
model's name, and the world seed comes from the global seed, the benchmark and the control,
not from the cell seed (which differs per target model). So the cells of one simulation, one
per target, all see the same scores for every model, as the paper's five cohort rows do.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pandas as pd

from medexp.benchmarks.base import Example
from medexp.kernel.hashing import derive_seed
from medexp.stats.calibration import calibration_scores

log = logging.getLogger("medexp")

EASINESS_FIELD = "easiness"


def world_seed(cfg) -> int:
    """Seed of the synthetic world of a cell: shared by every target model of one simulation."""
    return derive_seed(cfg.seed, "synthetic-world", cfg.bench.name, cfg.control.name)


def synthetic_cohort_scores(control_cfg, examples: Sequence[Example], target: str, seed: int):
    """Score tables (``medexp.detectors.CohortScores``) of every cohort model, ``target`` first.

    ``seed`` is the world seed: model m's noise and contaminated examples come from the stream
    derive_seed(seed, m), whichever model is the target.
    """
    from medexp.detectors import CohortScores

    cohort = dict(control_cfg.cohort)
    if not cohort:
        raise ValueError(f"control={control_cfg.name}: control.cohort is empty; name the models and their gains")
    if target not in cohort:
        raise ValueError(
            f"model.name={target!r} is not in the synthetic cohort of control={control_cfg.name}; "
            f"choose one of {sorted(cohort)}"
        )
    easiness = example_easiness(examples)
    tables = {}
    for name, model in cohort.items():
        rng = np.random.default_rng(derive_seed(seed, "synthetic-model", name))
        scores = calibration_scores(
            easiness, float(model.gain), float(model.offset), float(control_cfg.noise_sd), rng,
            float(model.contaminated_fraction), float(control_cfg.contamination_size),
        )
        tables[name] = synthetic_score_table(examples, scores)
    return CohortScores(target, tables)


def example_easiness(examples: Sequence[Example]) -> np.ndarray:
    """The easiness e_i of each example (meta ``easiness``, set by ``bench=synthetic``)."""
    missing = [ex.example_id for ex in examples if EASINESS_FIELD not in ex.meta]
    if missing:
        raise ValueError(
            f"control=synthetic needs examples with an easiness (bench=synthetic): {len(missing)} of "
            f"{len(examples)} have no meta {EASINESS_FIELD!r} (first: {missing[0]})"
        )
    return np.array([float(ex.meta[EASINESS_FIELD]) for ex in examples], dtype=np.float64)


def synthetic_score_table(examples: Sequence[Example], scores: np.ndarray) -> pd.DataFrame:
    """A score table in the columns ``medexp.scoring.example_scores`` produces: each example
    is a one-token answer whose log-prob and Min-K%++ value are both the synthetic score, so
    every per-example score a detector reads (Min-K%++ m_i, sum and mean log-prob) is s_i."""
    values = [float(value) for value in scores]
    return pd.DataFrame({
        "example_id": [ex.example_id for ex in examples],
        "position": [ex.position for ex in examples],
        "n_answer_tokens": 1,
        "token_logprobs": [[value] for value in values],
        "token_minkpp_z": [[value] for value in values],
        "sum_logprob": values,
        "mean_logprob": values,
        "boundary_merged": False,
    })


def synthetic_cell_scores(cfg, examples):
    """The cohort score tables of the cell ``cfg`` (its config) under control=synthetic, over ``examples``."""
    if cfg.detector.get("cohort"):
        log.info("control=synthetic: detector.cohort %s is ignored; the cohort is control.cohort",
                 list(cfg.detector.cohort))
    return synthetic_cohort_scores(cfg.control, examples, str(cfg.model.name), world_seed(cfg))
