"""Hand-built cells for the report tests: TrackedRun objects in memory, or runs logged to a store."""

from __future__ import annotations

import itertools
from typing import Any

from medexp.tracking import TrackedRun

_clock = itertools.count(1_000)


def cell_key(model: str, bench: str, detector: str, control: str) -> str:
    return f"model={model},bench={bench},detector={detector},control={control}"


def cell_tags(model: str, bench: str, detector: str, control: str, family: str | None = None) -> dict[str, str]:
    """The tags run_cell gives a cell; the family defaults to <detector>/<control> as in conf/config.yaml."""
    return {
        "medexp.model": model,
        "medexp.bench": bench,
        "medexp.detector": detector,
        "medexp.control": control,
        "medexp.cell_key": cell_key(model, bench, detector, control),
        "medexp.family": family or f"{detector}/{control}",
    }


def tracked(model: str, bench: str, detector: str, control: str, metrics: dict[str, float], *,
            status: str = "FINISHED", family: str | None = None, error: str | None = None,
            params: dict[str, str] | None = None, start_time: int | None = None, run_id: str | None = None,
            settings: str | None = None) -> TrackedRun:
    """An in-memory TrackedRun of a cell; later calls get later start times unless one is given.
    ``settings``: its tag medexp.settings (None: a run tracked before the tag existed)."""
    tags = cell_tags(model, bench, detector, control, family)
    if error is not None:
        tags["medexp.error"] = error
    if settings is not None:
        tags["medexp.settings"] = settings
    start = next(_clock) if start_time is None else start_time
    return TrackedRun(run_id or f"run{start}", status, dict(metrics), tags, dict(params or {}), start)


def tracking_config(uri: str, experiment: str = "medexp"):
    from omegaconf import OmegaConf

    from medexp.config.schemas import TrackingConfig

    return OmegaConf.structured(TrackingConfig(uri=uri, experiment=experiment))


def log_cell(tracker, model: str, bench: str, detector: str, control: str, metrics: dict[str, float], *,
             params: dict[str, Any] | None = None, files: dict[str, Any] | None = None,
             fail_with: BaseException | None = None, family: str | None = None) -> str:
    """Log one cell run the way run_cell does (tags, params, metrics, artefacts) and end it."""
    run_id = tracker.start(cell_key(model, bench, detector, control),
                           cell_tags(model, bench, detector, control, family), params or {})
    if fail_with is not None:
        tracker.fail(run_id, fail_with)
        return run_id
    tracker.log_metrics(run_id, metrics)
    if files:
        tracker.log_files(run_id, files)
    tracker.finish(run_id)
    return run_id


def replicate_model(arm: str, seed: int, dose: int = 30, recipe: str = "") -> tuple[str, dict[str, str]]:
    """Model name and run params of a demo replicate as conf/model/demo_<arm>_replicate.yaml names it:
    clean -> demo_clean_s<seed> (dose 0), leaky -> demo_leaky_e<dose>_s<seed>; with recipe "mc" as
    conf/model/demo_<arm>_mc.yaml does (demo_clean_mc_s<seed>, demo_leaky_mc_e<dose>_s<seed>)."""
    prefix = f"demo_{arm}_{recipe}_" if recipe else f"demo_{arm}_"
    name = f"{prefix}s{seed}" if arm == "clean" else f"{prefix}e{dose}_s{seed}"
    return name, {"model.demo.seed": str(seed), "model.demo.leak_epochs": str(0 if arm == "clean" else dose),
                  "model.demo.choice_form": str(recipe == "mc"), "detector.alpha": "0.01"}


def tracked_replicate(arm: str, seed: int, detector: str, control: str, metrics: dict[str, float], *,
                      dose: int = 30, recipe: str = "", **kwargs) -> TrackedRun:
    """A demo replicate's cell on bench demo, in its seed's family as experiment=demo_replicates sets it."""
    name, params = replicate_model(arm, seed, dose, recipe)
    return tracked(name, "demo", detector, control, metrics, params={**params, **kwargs.pop("params", {})},
                   family=kwargs.pop("family", f"{detector}/{control}/replicate_s{seed}"), **kwargs)
