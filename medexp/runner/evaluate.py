"""From a composed cell config to a detector result: load, control, score, test.

Each detector schema maps to one evaluator (registered with :func:`evaluator`) that fetches the
score tables its detector needs and calls the detector, a pure function over those tables.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig, OmegaConf

from medexp.benchmarks.base import Benchmark, Example
from medexp.benchmarks.skips import skip_metrics
from medexp.config.schemas import ExchConfig, ExchRankConfig, ImageNNConfig
from medexp.detectors.base import DetectorResult
from medexp.runner.inputs import CellInputs, load_inputs

log = logging.getLogger("medexp")

# Model settings that cannot change a score; left out of the score-cache key. (`independent` names
# another model: the counterpart a differential audit pairs this one with.)
SCORE_NEUTRAL_MODEL_KEYS = (
    "name", "device", "device_map", "batch_size", "token_budget", "independent",
    # black-box transport settings: they change how a server is asked, never what it answers
    "api_key_env", "max_concurrency", "max_retries", "request_timeout", "retry_backoff", "retry_backoff_max",
    "retry_after_max", "preflight",
    # how an imported file is read: imported answers are read from their file every time, never cached
    "reply_fields", "status_map",
)


@dataclass
class CellContext:
    """Everything an evaluator may use; the model is loaded only when a score is not cached."""

    cfg: DictConfig
    seed: int
    benchmark: Benchmark
    examples: list[Example]  # released order until the control has chosen its examples and order
    cache_dir: Path
    # Model configs joining detector.cohort as references (external baselines; when a baseline
    # is the audited model, the cell's own model too). Entries naming the target are skipped.
    cohort_additions: list[DictConfig] = field(default_factory=list)
    corpus: Benchmark | None = None  # image_nn's reference corpus, loaded with the cell's inputs
    twin: Benchmark | None = None  # perturbation_gap: the bench's perturbed twin, loaded with the cell's inputs

    @functools.cached_property
    def model_key(self) -> dict:
        return model_cache_key(self.cfg.model, self.cache_dir)

    @functools.cached_property
    def _scorer(self):
        from medexp.models import load_scorer

        return load_scorer(self.cfg.model, self.cache_dir)

    def scorer(self):
        return self._scorer


def model_settings_key(model_cfg) -> dict:
    """The model settings that can change a score: what names a model before its weights exist."""
    resolved = OmegaConf.to_container(model_cfg, resolve=True, enum_to_str=True)
    return {name: value for name, value in resolved.items() if name not in SCORE_NEUTRAL_MODEL_KEYS}


def model_cache_key(model_cfg, cache_dir: Path) -> dict:
    """What can change a model's scores (the score-cache key): its settings, and the bytes of its
    weights when they are a local directory (a demo model is built first if needed)."""
    from medexp.models import weights_fingerprint

    return {**model_settings_key(model_cfg), "weights": weights_fingerprint(model_cfg, cache_dir)}


Evaluator = Callable[[CellContext], DetectorResult]
_EVALUATORS: dict[type, Evaluator] = {}


def evaluator(schema: type) -> Callable[[Evaluator], Evaluator]:
    """Register the evaluator of the detectors whose config has structured type ``schema``."""

    def register(function: Evaluator) -> Evaluator:
        _EVALUATORS[schema] = function
        return function

    return register


def check_cell(cfg: DictConfig) -> None:
    """What can be checked before anything is loaded: an evaluator exists, the control fits."""
    from medexp.controls import check_control_fits

    schema = OmegaConf.get_type(cfg.detector)
    if schema not in _EVALUATORS:
        raise NotImplementedError(f"no evaluator for detector schema {schema.__name__}")
    check_control_fits(cfg.control, cfg.detector)


def evaluate(cfg: DictConfig, seed: int, inputs: CellInputs | None = None) -> tuple[dict[str, float], DetectorResult]:
    """Run the cell ``cfg`` describes on its ``inputs`` (loaded here when not given): control,
    scores, detector; return its metrics (the detector's, plus ``control_order_spearman``,
    ``n_skipped_examples``, ``n_skipped.<reason>`` and, when bench.dedup removed rows,
    ``n_deduplicated``) and result."""
    from medexp.config.schemas import ControlKind
    from medexp.controls import apply_control, order_spearman, run_with_baselines

    check_cell(cfg)  # before anything is loaded or scored
    cache_dir = Path(cfg.paths.cache_dir)
    inputs = inputs or load_inputs(cfg, cache_dir)
    benchmark = inputs.benchmark
    ctx = CellContext(cfg, seed, benchmark, list(benchmark.examples), cache_dir, corpus=inputs.corpus,
                      twin=inputs.twin)
    # The control may read the cell model's scores of the released examples to choose its order.
    ctx.examples = apply_control(ctx)
    run = _EVALUATORS[OmegaConf.get_type(cfg.detector)]
    if ControlKind(cfg.control.kind) is ControlKind.external_baseline:
        result = run_with_baselines(ctx, run)
    else:
        result = run(ctx)
    metrics = {
        **result.metrics,
        "control_order_spearman": order_spearman(ctx.examples),
        "n_skipped_examples": float(len(benchmark.skipped)),
    }
    # Rows skipped while loading, by reason; an answering detector's examples skipped while making
    # probes for the same reason add to the same count.
    for name, count in skip_metrics(benchmark.skipped).items():
        metrics[name] = metrics.get(name, 0.0) + count
    if benchmark.removed_duplicates:
        metrics["n_deduplicated"] = float(len(benchmark.removed_duplicates))
    return metrics, result


@evaluator(ExchConfig)
def _exch(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import exch_detector
    from medexp.scoring import shard_order_scores

    table = shard_order_scores(ctx.scorer, ctx.model_key, ctx.examples, ctx.cache_dir, ctx.cfg.detector, ctx.seed)
    return exch_detector(table, ctx.cfg.detector, len(ctx.examples))


@evaluator(ExchRankConfig)
def _exch_rank(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import exch_rank_detector
    from medexp.scoring import example_scores

    table = example_scores(ctx.scorer, ctx.model_key, ctx.examples, ctx.cache_dir)
    return exch_rank_detector(table, ctx.cfg.detector, ctx.seed)


@evaluator(ImageNNConfig)
def _image_nn(ctx: CellContext) -> DetectorResult:
    """Image near-neighbour overlap: needs no language model, so the cell's model plays no part."""
    from medexp.hashing import derive_seed
    from medexp.images.audit import image_nn_audit

    detector = ctx.cfg.detector
    # Seeded by corpus and backbone, not by the cell: all benchmarks share one calibrated tau.
    seed = derive_seed(ctx.cfg.seed, "image_nn", detector.corpus.name, detector.embedder.name)
    return image_nn_audit(ctx.examples, detector, ctx.cache_dir, seed, corpus=ctx.corpus)


# The cohort detectors' evaluators live in their own module; importing it registers them.
from medexp.runner import cohort_evaluators  # noqa: E402,F401
from medexp.runner import synthetic_evaluators  # noqa: E402,F401
from medexp.runner import memorization_evaluators  # noqa: E402,F401
from medexp.runner import mmdetect_evaluators  # noqa: E402,F401
from medexp.runner import medvigil_evaluators  # noqa: E402,F401
from medexp.runner import perturbation_evaluators  # noqa: E402,F401

