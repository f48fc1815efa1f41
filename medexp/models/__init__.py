"""Model adapters: a model config -> a scorer that fills score tables."""

from __future__ import annotations

from pathlib import Path


def model_location(model_cfg, cache_dir: str | Path) -> str:
    """Where the checkpoint is loaded from: a hub id, a local directory, or a built demo model."""
    from medexp.config.schemas import ModelSource

    if ModelSource(model_cfg.source) is ModelSource.demo:
        if model_cfg.demo is None:
            raise ValueError(f"model={model_cfg.name}: source 'demo' needs a `demo:` section")
        from medexp.demo.models import demo_model_dir

        return str(demo_model_dir(model_cfg.demo, cache_dir))
    if not model_cfg.pretrained:
        raise ValueError(f"model={model_cfg.name}: set `pretrained` to a hub id or a local directory")
    return str(model_cfg.pretrained)


def load_scorer(model_cfg, cache_dir: str | Path):
    from medexp.models.hf import HFScorer

    return HFScorer(model_cfg, model_location(model_cfg, cache_dir))


__all__ = ["load_scorer", "model_location"]
