"""Models on record: per-example scores made elsewhere (``source: scores``) beside scored models.

A record stands where a model would: :func:`model_example_scores` gives the same score table
whether the scores are read from a file (:mod:`medexp.scoring.records`) or computed through the
score cache, and :func:`record_refusal` says, before any work, when a detector needs more than a
record holds.
"""

from __future__ import annotations

import functools
from pathlib import Path

from medexp.config.schemas import ScoreKind
from medexp.models import load_scorer
from medexp.models.keys import model_cache_key

# What a detector reads from its models (its schema's ``model_needs``): only "scores" (one
# teacher-forced score per example) can come from a record of scores.
RECORD_READABLE = "scores"
# Controls a record cannot serve, and why: they order examples by per-token output it lacks, or
# change what the model is shown (a record's scores were made with the images as released).
CONTROLS_NEEDING_THE_MODEL = {
    "order_answer_len": "orders examples by the model's answer token counts",
    "order_mink": "orders examples by the model's per-token Min-K%++ scores",
    "blind_image": "scores the examples without their images, which needs the model itself",
}


def is_record(model_cfg) -> bool:
    """Whether a model is a record of per-example scores made elsewhere (``source: scores``)."""
    return model_cfg.get("source") == "scores"


def record_refusal(model_cfg, detector_cfg, control_cfg=None) -> str | None:
    """Why a record of scores cannot serve this detector (and control), or None when it can.

    Checked before any work: a record holds one score per example, never the model itself
    (re-ordered shards for exch, answers to probes) nor per-token values (Min-K%++ z, answer token
    counts for an ordering control)."""
    from omegaconf import OmegaConf

    if not is_record(model_cfg):
        return None
    schema = OmegaConf.get_type(detector_cfg)
    needs = getattr(schema, "model_needs", "model")
    where = f"model={model_cfg.name} is a record of per-example scores ({model_cfg.scores.path})"
    if needs != RECORD_READABLE:
        what = getattr(schema, "model_needs_reason", needs)
        return f"{where}; detector={detector_cfg.name} needs {what}, which a record does not hold"
    kind = ScoreKind(model_cfg.scores.score_kind).value
    score = detector_cfg.get("score")
    if score in ("sum_logprob", "mean_logprob") and score != kind:
        return (f"{where} holding {kind} only (a record without token counts cannot give the other); "
                f"set detector.score={kind}")
    kind = control_cfg.get("kind") if control_cfg is not None else None
    if kind in CONTROLS_NEEDING_THE_MODEL:
        return (f"{where}; control={control_cfg.name} {CONTROLS_NEEDING_THE_MODEL[kind]}, which a record cannot "
                "give (order_hash and none need nothing more)")
    return None


def model_example_scores(model_cfg, examples, cache_dir: str | Path, bench_cfg, scorer=None, model_key=None):
    """The per-example score table of ``examples`` (in their order) under a model: read from its
    file for a record (``(table, RecordScores)``), else scored through the score cache by
    ``scorer`` (a callable returning the loaded scorer; built here from the config when None)
    under ``model_key`` (computed here when None) with ``None`` in place of the record."""
    from medexp.scoring import example_scores

    if is_record(model_cfg):
        from medexp.scoring.records import record_scores

        record = record_scores(model_cfg.scores, str(model_cfg.name), examples, bench_cfg)
        return record.table, record
    scorer = scorer or functools.cache(functools.partial(load_scorer, model_cfg, cache_dir))
    key = model_key if model_key is not None else model_cache_key(model_cfg, cache_dir)
    return example_scores(scorer, key, examples, cache_dir), None
