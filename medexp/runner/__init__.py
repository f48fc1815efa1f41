"""Run one cell end to end: benchmark -> control -> scores -> detector -> MLflow run."""

from __future__ import annotations

import functools
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from medexp.hashing import stable_hash
from medexp.runner.cell import Cell

log = logging.getLogger("medexp")

# Model settings that cannot change a score; left out of the score-cache key.
_SCORE_NEUTRAL_MODEL_KEYS = ("name", "device", "batch_size")
# Config sections that do not change a cell's result; left out of its fingerprint.
_RUN_NEUTRAL_KEYS = ("force", "paths", "tracking")


@dataclass(frozen=True)
class CellOutcome:
    cell_key: str
    run_id: str
    status: str  # FINISHED, FAILED or CACHED (a finished run with this key already existed)
    metrics: dict[str, float]
    error: str | None = None

    def summary(self) -> str:
        if self.status == "FAILED":
            return f"{self.cell_key}  FAILED: {self.error}  run_id={self.run_id}"
        flag = bool(self.metrics.get("flag", 0.0))
        reused = "  (tracked earlier; force=true recomputes)" if self.status == "CACHED" else ""
        return f"{self.cell_key}  p_value={self.metrics['p_value']:.4g}  flag={flag}  run_id={self.run_id}{reused}"


def run_cell(cfg: DictConfig) -> CellOutcome:
    """Run (or reuse) the cell described by a composed medexp config; never raises for cell errors."""
    from medexp.tracking import Tracker

    cell = Cell.from_config(cfg)
    tracker = Tracker(cfg.tracking, cfg.paths.root)
    resolved = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    # Same key but other settings (seed, permutations, ...) is another computation.
    fingerprint = stable_hash({k: v for k, v in resolved.items() if k not in _RUN_NEUTRAL_KEYS})
    if not cfg.force:
        done = tracker.find_finished(cell.key, fingerprint)
        if done is not None:
            return CellOutcome(cell.key, done.run_id, "CACHED", done.metrics)
    seed = cell.seed(cfg.seed)
    tags = {
        "medexp.model": cell.model,
        "medexp.bench": cell.bench,
        "medexp.detector": cell.detector,
        "medexp.control": cell.control,
        "medexp.cell_key": cell.key,
        "medexp.family": str(cfg.detector.family),
        "medexp.version": _version(),
        "medexp.seed": str(seed),
        "medexp.config_hash": fingerprint,
    }
    run_id = tracker.start(cell.key, tags, _flatten(resolved))
    try:
        tracker.log_files(run_id, {"config.yaml": OmegaConf.to_yaml(resolved)})
        metrics, result = _evaluate(cfg, seed)
        tracker.log_metrics(run_id, metrics)
        files = {f"{name}.png": figure for name, figure in result.figures.items()}
        if result.table is not None:
            files[f"{result.table_name}.parquet"] = result.table
        tracker.log_files(run_id, files)
        tracker.finish(run_id)
    except BaseException as error:
        tracker.fail(run_id, error)  # nothing is left RUNNING, even on Ctrl-C
        if not isinstance(error, Exception):
            raise
        log.exception("cell %s failed", cell.key)  # one cell's failure never stops a sweep
        return CellOutcome(cell.key, run_id, "FAILED", {}, f"{type(error).__name__}: {error}")
    return CellOutcome(cell.key, run_id, "FINISHED", metrics)


def _evaluate(cfg: DictConfig, seed: int):
    from medexp.benchmarks import load_benchmark_from_config
    from medexp.config.schemas import ExchConfig, ExchRankConfig
    from medexp.controls import apply_control
    from medexp.detectors import exch_detector, exch_rank_detector
    from medexp.models import load_scorer
    from medexp.scoring import example_scores, shard_order_scores

    cache_dir = Path(cfg.paths.cache_dir)
    benchmark = load_benchmark_from_config(cfg.bench, cache_dir)
    if benchmark.skipped:
        log.warning("%s: skipped %d examples (first: %s)", benchmark.name, len(benchmark.skipped), benchmark.skipped[0].reason)
    examples = apply_control(cfg.control, benchmark.examples)
    scorer = functools.cache(lambda: load_scorer(cfg.model, cache_dir))  # loaded only on a cache miss
    model_key = {
        key: value
        for key, value in OmegaConf.to_container(cfg.model, resolve=True, enum_to_str=True).items()
        if key not in _SCORE_NEUTRAL_MODEL_KEYS
    }
    schema = OmegaConf.get_type(cfg.detector)
    if schema is ExchConfig:
        table = shard_order_scores(scorer, model_key, examples, cache_dir, cfg.detector, seed)
        result = exch_detector(table, cfg.detector, len(examples))
    elif schema is ExchRankConfig:
        table = example_scores(scorer, model_key, examples, cache_dir)
        result = exch_rank_detector(table, cfg.detector, seed)
    else:
        raise NotImplementedError(f"no runner for detector schema {schema.__name__}")
    metrics = {**result.metrics, "n_skipped_examples": float(len(benchmark.skipped))}
    return metrics, result


def run_from_hydra(cfg: DictConfig) -> CellOutcome:
    """Entry used by ``python -m medexp``: run the cell, print its summary line."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from medexp.tracking import tracking_uri, ui_command

    outcome = run_cell(cfg)
    print(outcome.summary())
    print(f"view it: {ui_command(tracking_uri(cfg.tracking, cfg.paths.root))}")
    if outcome.status == "FAILED" and HydraConfig.get().mode != RunMode.MULTIRUN:
        sys.exit(1)  # a single failed cell is an error; inside a sweep the others go on
    return outcome


def _flatten(tree, prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _version() -> str:
    from medexp import __version__

    return __version__
