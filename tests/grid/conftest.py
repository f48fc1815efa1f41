"""Helpers for sweep tests: cheap cells on the demo models, a tracking store to inspect afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest

# exch_rank with few permutations on the first 120 examples: a cell costs the scoring of 120
# examples (cached per model and order after the first) and a run.
CHEAP_CELL = ("detector=exch_rank", "detector.n_permutations=500", "bench.max_examples=120")


def store(uri: str):
    """The medexp Tracker on ``uri`` (experiment ``medexp``)."""
    from omegaconf import OmegaConf

    from medexp.tracking import Tracker

    return Tracker(OmegaConf.create({"uri": uri, "experiment": "medexp", "artifact_root": None}), ".")


def sweep_runs(uri: str):
    return store(uri).search({"medexp.kind": "sweep"})


def cell_runs(uri: str):
    """Every cell run in the store, newest first."""
    return [run for run in store(uri).search({}) if "medexp.cell_key" in run.tags]


def write_experiment(conf_dir: Path, name: str, text: str) -> str:
    """An experiment preset in a user config folder; returns the override adding it to the search path."""
    (conf_dir / "experiment").mkdir(parents=True, exist_ok=True)
    (conf_dir / "experiment" / f"{name}.yaml").write_text(text, encoding="utf-8")
    return f"hydra.searchpath=[file://{conf_dir}]"


@pytest.fixture()
def common(demo_cache, tracking_uri) -> tuple[str, ...]:
    """Overrides every test sweep shares: cheap cells, the session's demo cache, a fresh store."""
    return (*CHEAP_CELL, f"paths.cache_dir={demo_cache}", f"tracking.uri={tracking_uri}")
