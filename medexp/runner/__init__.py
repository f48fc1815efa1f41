"""Run one cell end to end: benchmark -> control -> scores -> detector -> MLflow run."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from medexp.hashing import stable_hash
from medexp.runner.cell import Cell
from medexp.runner.evaluate import evaluate

log = logging.getLogger("medexp")

# Config sections that do not change a cell's result; left out of its fingerprint.
_RUN_NEUTRAL_KEYS = ("force", "paths", "tracking")


@dataclass(frozen=True)
class CellOutcome:
    cell_key: str
    run_id: str | None  # None only when the tracking store failed before the run was opened
    status: str  # FINISHED, FAILED or CACHED (a finished run with this key already existed)
    metrics: dict[str, float]
    error: str | None = None

    def summary(self) -> str:
        if self.status == "FAILED":
            return f"{self.cell_key}  FAILED: {self.error}  run_id={self.run_id}"
        reused = "  (tracked earlier; force=true recomputes)" if self.status == "CACHED" else ""
        if "p_value" not in self.metrics:  # a descriptive result (e.g. composition_sweep): no test, all its metrics
            values = "  ".join(f"{name}={value:.4g}" for name, value in sorted(self.metrics.items()))
            return f"{self.cell_key}  descriptive  {values}  run_id={self.run_id}{reused}"
        flag = bool(self.metrics.get("flag", 0.0))
        return f"{self.cell_key}  p_value={self.metrics['p_value']:.4g}  flag={flag}  run_id={self.run_id}{reused}"


def run_cell(cfg: DictConfig, parent_run_id: str | None = None, tracker=None) -> CellOutcome:
    """Run (or reuse) the cell described by a composed medexp config; never raises for cell errors.

    ``parent_run_id`` nests a computed run under a sweep's parent run; a reused (CACHED) run keeps
    the parent it was computed under. ``tracker``: a ``medexp.tracking.Tracker`` of
    ``cfg.tracking`` already open (a sweep cell has one); by default one is opened here.
    """
    from medexp.tracking import Tracker

    cell = Cell.from_config(cfg)
    tracker = tracker or Tracker(cfg.tracking, cfg.paths.root)
    resolved = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    # Same key but other settings (seed, permutations, ...) or another medexp version is another
    # computation.
    fingerprint = stable_hash(
        {"medexp": _version(), **{k: v for k, v in resolved.items() if k not in _RUN_NEUTRAL_KEYS}}
    )
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
        "medexp.family": str(cfg.family),
        "medexp.version": _version(),
        "medexp.seed": str(seed),
        "medexp.config_hash": fingerprint,
    }
    run_id = tracker.start(cell.key, tags, _flatten(resolved), parent_run_id=parent_run_id)
    try:
        tracker.log_files(run_id, {"config.yaml": OmegaConf.to_yaml(resolved)})
        metrics, result = evaluate(cfg, seed)
        tracker.log_metrics(run_id, metrics)
        files = {f"{name}.png": figure for name, figure in result.figures.items()}
        if result.table is not None:
            files[f"{result.table_name}.parquet"] = result.table
        files.update({f"{name}.parquet": table for name, table in result.extra_tables.items()})
        tracker.log_files(run_id, files)
        tracker.finish(run_id)
    except BaseException as error:
        tracker.fail(run_id, error)  # nothing is left RUNNING, even on Ctrl-C
        if not isinstance(error, Exception):
            raise
        log.exception("cell %s failed", cell.key)  # one cell's failure never stops a sweep
        return CellOutcome(cell.key, run_id, "FAILED", {}, f"{type(error).__name__}: {error}")
    return CellOutcome(cell.key, run_id, "FINISHED", metrics)


def run_from_hydra(cfg: DictConfig) -> CellOutcome:
    """Entry used by ``python -m medexp``: run the cell (a sweep's cell under -m), print its summary line."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from medexp.tracking import tracking_uri, ui_command

    in_sweep = HydraConfig.get().mode == RunMode.MULTIRUN
    if in_sweep:
        from medexp.runner.sweep import run_sweep_cell

        outcome = run_sweep_cell(cfg)
    else:
        outcome = run_cell(cfg)
    print(outcome.summary())
    print(f"view it: {ui_command(tracking_uri(cfg.tracking, cfg.paths.root))}")
    if outcome.status == "FAILED" and not in_sweep:
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
