"""Trained models in the cache: one directory per training spec, trained on first use.

``<cache>/trained/<method>-<arm>-s<seed>-<hash>/`` holds the model and its image processor
(``save_pretrained``) and ``medexp_train.json``, written last: the spec, the partition (which
examples were canaries and which were test), and the training report (losses, accuracy per
part, the accountant's epsilon under DP). The hash covers everything in the spec that changes
the weights (not ``replicate_seeds``), so a changed spec trains a new model and an unchanged one
is never trained twice; concurrent processes wait for one another on a file lock.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from medexp.kernel.hashing import stable_hash

log = logging.getLogger("medexp")

BUILDER_VERSION = "medexp-train-v1"
MANIFEST = "medexp_train.json"


def spec_settings(spec) -> dict[str, Any]:
    """The part of a training spec that names the weights."""
    from medexp.train.initial import init_settings

    settings = OmegaConf.to_container(spec, resolve=True, enum_to_str=True)
    settings.pop("replicate_seeds", None)
    settings["init"] = init_settings(spec.init)
    return settings


def trained_model_dir(spec, cache_dir: str | Path) -> Path:
    """Train (once) the model ``spec`` describes and return its directory."""
    from medexp.kernel.atomic import build_directory_once

    settings = spec_settings(spec)
    name = f"{settings['method']}-{settings['arm']}-s{settings['seed']}-{stable_hash([BUILDER_VERSION, settings])}"

    def build(staging: Path) -> dict[str, Any]:
        report = _train(spec, cache_dir, staging)
        log.info("trained model ready in %.0f s: %s", report["seconds"], name)
        return {"builder": BUILDER_VERSION, "spec": settings, **report}

    return build_directory_once(Path(cache_dir) / "trained" / name, MANIFEST, build)


def read_manifest(model_dir: str | Path) -> dict[str, Any]:
    """The training record of a trained model directory."""
    path = Path(model_dir) / MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a complete trained model ({error})") from error


def _train(spec, cache_dir, out_dir: Path) -> dict[str, Any]:
    from medexp.benchmarks import load_benchmark_from_config
    from medexp.config.schemas import TrainArm
    from medexp.train.initial import initial_state_dir
    from medexp.train.loop import ArmData, train_arm
    from medexp.train.partition import partition_examples

    benchmark = load_benchmark_from_config(spec.data, cache_dir)
    examples = benchmark.examples
    classes = sorted({example.answer for example in examples})
    if len(classes) < 2:
        raise ValueError(f"bench={spec.data.name}: a classifier needs at least two classes, the data has {classes}")
    partition = partition_examples(examples, spec.partition)
    by_id = {example.example_id: example for example in examples}
    parts = {name: [by_id[i] for i in ids] for name, ids in partition.as_dict().items()}
    arm = TrainArm(spec.arm)
    seen = parts["train"] + (parts["canary"] if arm is TrainArm.candidate else [])
    log.info("training the %s arm (%s, seed %d) on %d examples of bench=%s (%d classes)",
             arm.value, spec.method, spec.seed, len(seen), spec.data.name, len(classes))
    initial = initial_state_dir(spec, classes, cache_dir)
    report = train_arm(spec, ArmData(seen, parts), initial, out_dir)
    return {"classes": classes, "partition": partition.as_dict(), "initial_state": initial.name,
            "n_skipped_examples": len(benchmark.skipped), **report}
