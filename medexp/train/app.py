"""``python -m medexp.train``: train the models of differential pairs and log each as an MLflow run.

For every model config listed in ``models``: a trained model (source: trained) is trained for
both arms and every replicate seed (``seeds``, else its ``train.replicate_seeds``); a demo
model is built, with its independent counterpart. A model already in the cache is not trained
again, and a model whose training run is already tracked is not logged again. Training runs
carry the tag ``medexp.kind=train`` (the report reads cells only) and hold the training record:
accuracy and loss per partition, the loss per epoch, and under DP-SGD the accountant's epsilon.
"""

from __future__ import annotations

import functools
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("medexp")


@dataclass(frozen=True)
class TrainingOutcome:
    model: str
    status: str  # READY (trained now or found in the cache) or FAILED
    run_id: str | None
    metrics: dict[str, float]
    error: str | None = None

    def summary(self) -> str:
        if self.status == "FAILED":
            return f"{self.model}  FAILED: {self.error}  run_id={self.run_id}"
        shown = "  ".join(f"{key}={value:.4g}" for key, value in sorted(self.metrics.items())
                          if key.startswith(("accuracy_", "epsilon", "seconds")))
        return f"{self.model}  ready  {shown}  run_id={self.run_id}"


def models_to_train(names, seeds) -> list[DictConfig]:
    """The model configs ``names`` stand for: both arms of every replicate of a trained model;
    a demo model (per seed, when seeds are given) and its counterpart. Each config once."""
    from medexp.config import listed_model_config
    from medexp.config.ranges import validate
    from medexp.config.schemas import TrainArm
    from medexp.train.pairs import is_trained, replicate_seeds, seeded_pair, with_seed

    if not names:
        raise ValueError("nothing to train: list model configs, e.g. models=[demo_vit] or experiment=demo_memorization")
    chosen: dict[str, DictConfig] = {}
    for name in names:
        base = listed_model_config(str(name))  # a name, or a name with overrides ("demo_leaky demo.leak_epochs=5")
        validate(base, f"model {name}")
        if is_trained(base) and TrainArm(base.train.arm) is not TrainArm.candidate:
            raise ValueError(f"models: list candidate configs; {name} is an independent arm (both arms are trained)")
        for seed in replicate_seeds(base, seeds):
            if is_trained(base) or base.get("independent"):
                pair = seeded_pair(base, None, seed)
                members = [pair.candidate, pair.independent]
            else:
                members = [base if seed is None else with_seed(base, seed)]
            for member in members:
                chosen.setdefault(_identity(member), member)
    return list(chosen.values())


def _identity(model_cfg) -> str:
    """What tells two configs apart: a demo model's name stays the same across its seeds."""
    from medexp.kernel.hashing import stable_hash
    from medexp.models.keys import model_settings_key

    return f"{model_cfg.name}:{stable_hash(model_settings_key(model_cfg))}"


def run_training(cfg) -> list[TrainingOutcome]:
    from medexp.config.ranges import ConfigRangeError
    from medexp.demo.models import demo_reference_dir
    from medexp.models import model_location
    from medexp.tracking import Tracker

    tracker = Tracker(cfg.tracking, cfg.paths.root)
    outcomes = []
    cache_dir = Path(cfg.paths.cache_dir)
    chosen = models_to_train(cfg.models, cfg.seeds)
    if cfg.references and not any(map(_leaky_demo, chosen)):
        raise ConfigRangeError(f"references={cfg.references}: reference models repeat a leaky demo model's recipe, and "
                               f"models={list(cfg.models)} lists none (e.g. models=[demo_leaky])")
    for model_cfg in chosen:
        builds = [(str(model_cfg.name), functools.partial(model_location, model_cfg, cache_dir), {})]
        if cfg.references and _leaky_demo(model_cfg):
            builds += [(f"{model_cfg.name}_reference{index}",
                        functools.partial(demo_reference_dir, model_cfg.demo, index, list(cfg.reference_splits), cache_dir),
                        {"medexp.reference": str(index)})
                       for index in range(int(cfg.references))]
        for name, locate, tags in builds:
            outcome = _train_one(name, model_cfg, locate, tracker, tags)
            print(outcome.summary(), flush=True)
            outcomes.append(outcome)
    return outcomes


def _leaky_demo(model_cfg) -> bool:
    """Whether reference models can be built for this model: a demo model with a leak."""
    return model_cfg.get("source") == "demo" and int(model_cfg.demo.leak_epochs) > 0


def run_from_hydra(cfg) -> list[TrainingOutcome]:
    from medexp.config.ranges import ConfigRangeError, validate
    from medexp.tracking import TrackingUnavailable, ui_command

    try:
        validate(cfg)
        outcomes = run_training(cfg)
    except (ConfigRangeError, TrackingUnavailable) as error:
        print(f"medexp.train: error: {error}", file=sys.stderr)
        sys.exit(2)
    failed = sum(outcome.status == "FAILED" for outcome in outcomes)
    print(f"{len(outcomes)} models: {len(outcomes) - failed} ready, {failed} failed")
    print(f"view them: {ui_command(cfg.tracking, cfg.paths.root)}")
    if failed:
        sys.exit(1)
    return outcomes


def _train_one(name: str, model_cfg, locate, tracker, extra_tags: dict[str, str]) -> TrainingOutcome:
    """Build ``name`` (``locate()`` trains it, or finds it in the cache, and returns its directory)
    and log its training run once."""
    tags = {**_tags(model_cfg), "medexp.model": name, **extra_tags}
    try:
        location = Path(locate())
    except Exception as error:  # one model's failure does not stop the others
        log.exception("training %s failed", name)
        run_id = tracker.start(name, tags, _params(model_cfg))
        tracker.fail(run_id, error)
        return TrainingOutcome(name, "FAILED", run_id, {}, f"{type(error).__name__}: {error}")
    record = _record(model_cfg, location)
    metrics = _metrics(record)
    done = tracker.search({"medexp.kind": "train", "medexp.train_key": location.name}, "FINISHED", max_results=1)
    if done:
        return TrainingOutcome(name, "READY", done[0].run_id, metrics)
    run_id = tracker.start(name, {**tags, "medexp.train_key": location.name}, _params(model_cfg))
    try:
        tracker.log_metrics(run_id, metrics)
        tracker.log_files(run_id, {"training.json": _json(record), "config.yaml": OmegaConf.to_yaml(model_cfg)})
        tracker.finish(run_id)
    except BaseException as error:
        tracker.fail(run_id, error)
        raise
    return TrainingOutcome(name, "READY", run_id, metrics)


def _tags(model_cfg) -> dict[str, str]:
    from medexp import __version__
    from medexp.train.pairs import is_trained

    tags = {"medexp.kind": "train", "medexp.model": str(model_cfg.name), "medexp.version": __version__}
    if is_trained(model_cfg):
        spec = model_cfg.train
        tags.update({"medexp.train.arm": str(getattr(spec.arm, "value", spec.arm)),
                     "medexp.train.method": str(getattr(spec.method, "value", spec.method)),
                     "medexp.train.seed": str(spec.seed)})
    return tags


def _params(model_cfg) -> dict[str, Any]:
    import pandas as pd

    resolved = OmegaConf.to_container(model_cfg, resolve=True, enum_to_str=True)
    return {f"model.{key}": value for key, value in pd.json_normalize(resolved, sep=".").iloc[0].items()}


def _record(model_cfg, location: Path) -> dict[str, Any]:
    """The training record the model directory holds (a demo model's build report)."""
    from medexp.train.models import read_manifest
    from medexp.train.pairs import is_trained

    if is_trained(model_cfg):
        return read_manifest(location)
    from medexp.demo.models import read_build_report

    return read_build_report(location)


def _metrics(record: dict[str, Any]) -> dict[str, float]:
    metrics = {f"accuracy_{part}": value for part, value in (record.get("accuracy") or {}).items()}
    metrics.update({f"loss_{part}": value for part, value in (record.get("loss") or {}).items()})
    for key in ("final_loss", "steps", "seconds", "epsilon", "noise_multiplier", "n_train_examples", "samples_seen"):
        if isinstance(record.get(key), (int, float)):
            metrics[key] = float(record[key])
    return metrics


def _json(record: dict[str, Any]) -> str:
    import json

    return json.dumps(record, indent=1)
