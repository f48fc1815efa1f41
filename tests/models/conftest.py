"""Tiny checkpoints of every adapter family, built once per session, and scorers over them."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from medexp.config.schemas import ModelConfig
from medexp.models import scorer_class
from tests.models import tiny


@pytest.fixture(scope="session", autouse=True)
def tiny_models_on_one_torch_thread(one_torch_thread):
    """Every test here runs tiny models: one torch thread (see ``one_torch_thread``)."""


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tiny_families")


@pytest.fixture(scope="session")
def tiny_examples(tiny_root):
    """(image examples, text-only examples), images of several sizes and aspect ratios."""
    return tiny.write_examples(tiny_root / "examples")


_BUILT: dict[str, Path] = {}


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_root):
    """A function: family name -> directory of its tiny checkpoint (each built once)."""

    def checkpoint(name: str) -> Path:
        if name not in _BUILT:
            _BUILT[name] = tiny.build(name, tiny_root)
        return _BUILT[name]

    return checkpoint


def model_config(family: str, **overrides):
    settings = {"name": f"tiny_{family}", "family": family, "device": "cpu", "batch_size": 4, **overrides}
    return OmegaConf.structured(ModelConfig(**settings))


def make_scorer(directory: Path, family: str, **overrides):
    """A scorer of the family's adapter over a checkpoint directory, loaded with from_pretrained."""
    return scorer_class(family)(model_config(family, **overrides), str(directory))
