"""Tiny training specs: a ViT of a few thousand weights on a small generated findings set."""

from __future__ import annotations

from omegaconf import OmegaConf

from medexp.config.schemas import BenchConfig, DemoClassesConfig, ModelConfig, TrainSpec

TINY_ARCHITECTURE = {"patch_size": 8, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                     "intermediate_size": 32}


def tiny_data(n_images: int = 60, seed: int = 3):
    """Balanced classes: every class has enough examples for a stratified 70/15/15 split."""
    weights = {"normal": 0.25, "one_lesion": 0.25, "two_lesions": 0.25, "three_lesions": 0.25}
    return BenchConfig(name="tiny_findings", format="demo_classes", split="all",
                       demo_classes=DemoClassesConfig(n_images=n_images, seed=seed, class_weights=weights))


def tiny_model(name: str = "tiny_vit", n_images: int = 60, **train):
    """A trained-model config (source: trained) over the tiny set; ``train`` sets spec fields."""
    spec = TrainSpec(data=tiny_data(n_images), epochs=2, batch_size=16, learning_rate=3e-3, replicate_seeds=[1, 2],
                     seed=1)
    cfg = OmegaConf.structured(ModelConfig(name=name, family="image_classifier", source="trained", device="cpu",
                                           batch_size=64, train=spec))
    cfg.train.init.image_size = 16
    cfg.train.init.architecture = dict(TINY_ARCHITECTURE)
    for key, value in train.items():
        OmegaConf.update(cfg.train, key, value)
    return cfg


# Enough capacity and resolution to learn, and to memorise its 9 canaries in 60 epochs.
SMALL_ARCHITECTURE = {"patch_size": 8, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                      "intermediate_size": 64}


def write_config_dir(root, epochs: int = 2, seeds=(1, 2), image_size: int = 16, architecture=None):
    """A user config folder (``--config-dir``) adding the tiny set as bench=tiny_findings and the
    tiny ViT pair as model=tiny_vit (and tiny_vit_lora), trained for ``epochs`` per seed."""
    import json
    from pathlib import Path

    root = Path(root)
    (root / "bench").mkdir(parents=True, exist_ok=True)
    (root / "model").mkdir(parents=True, exist_ok=True)
    weights = {"normal": 0.25, "one_lesion": 0.25, "two_lesions": 0.25, "three_lesions": 0.25}
    (root / "bench" / "tiny_findings.yaml").write_text(
        "name: tiny_findings\nformat: demo_classes\nsplit: all\n"
        f"demo_classes: {{n_images: 60, seed: 3, class_weights: {json.dumps(weights)}}}\n")
    (root / "model" / "tiny_vit.yaml").write_text(
        "defaults:\n  - /bench@train.data: tiny_findings\n  - _self_\n"
        "name: tiny_vit-${.train.arm}-s${.train.seed}\nfamily: image_classifier\nsource: trained\ndevice: cpu\n"
        f"train:\n  seed: {seeds[0]}\n  replicate_seeds: {list(seeds)}\n  epochs: {epochs}\n  batch_size: 16\n"
        "  learning_rate: 3e-3\n"
        f"  init: {{image_size: {image_size}, architecture: {json.dumps(architecture or TINY_ARCHITECTURE)}}}\n")
    (root / "model" / "tiny_vit_lora.yaml").write_text(
        "defaults:\n  - tiny_vit\n  - _self_\nname: tiny_vit_lora-${.train.arm}-s${.train.seed}\ntrain:\n  method: lora\n")
    return root
