"""The initial weights both arms of a pair start from: built once per seed, saved, loaded twice.

The initial state is the pretrained checkpoint (or the architecture built from its config)
with a fresh classification head for the dataset's classes, plus, for LoRA methods, the fresh
adapters; everything new is drawn from the training seed. Saving it and loading it in each arm
makes "identical initialisation" a fact about files rather than about two random streams.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from omegaconf import OmegaConf

from medexp.kernel.hashing import derive_seed, stable_hash
from medexp.train.notices import known_notices_silenced

INIT_VERSION = "medexp-init-v1"
_MANIFEST = "medexp_init.json"


def uses_lora(spec) -> bool:
    from medexp.config.schemas import TrainMethod

    return TrainMethod(spec.method) in (TrainMethod.lora, TrainMethod.dp_lora)


def initial_state_dir(spec, classes: Sequence[str], cache_dir: str | Path) -> Path:
    """Build (once) the initial state of ``spec``'s pairs for these classes; return its directory."""
    from medexp.kernel.atomic import build_directory_once

    settings = {
        "init": init_settings(spec.init),
        "seed": int(spec.seed),
        "classes": list(classes),
        "lora": OmegaConf.to_container(spec.lora, resolve=True) if uses_lora(spec) else None,
    }
    target = Path(cache_dir) / "trained" / f"init-s{spec.seed}-{stable_hash([INIT_VERSION, settings])}"

    def build(staging: Path) -> dict:
        _build(spec, list(classes), staging, cache_dir)
        return settings

    return build_directory_once(target, _MANIFEST, build)


def init_settings(init) -> dict:
    """What names the starting weights: the init section, and for ``from_model`` the content of
    that model's config (so a retrained base means new fine-tuned models too)."""
    from medexp.config import model_config
    from medexp.models.keys import model_settings_key

    settings = OmegaConf.to_container(init, resolve=True, enum_to_str=True)
    if init.from_model:
        if init.pretrained:
            raise ValueError(f"train.init: set pretrained ({init.pretrained}) or from_model ({init.from_model}), not both")
        settings["from_model_config"] = model_settings_key(model_config(str(init.from_model)))
    return settings


def load_initial_state(directory: Path, spec):
    """(trainable model, image processor) of an initial state: a PeftModel for LoRA methods."""
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    model = AutoModelForImageClassification.from_pretrained(directory / "model")
    processor = AutoImageProcessor.from_pretrained(directory / "model")
    if uses_lora(spec):
        from peft import PeftModel

        with known_notices_silenced():
            model = PeftModel.from_pretrained(model, directory / "adapter", is_trainable=True)
    return model, processor


def _build(spec, classes: list[str], out_dir: Path, cache_dir) -> None:
    import torch

    labels = {"num_labels": len(classes), "id2label": dict(enumerate(classes)),
              "label2id": {label: index for index, label in enumerate(classes)}}
    torch.manual_seed(derive_seed(spec.seed, "initial weights"))
    if spec.init.from_model:
        model, processor = _pretrained(_base_location(str(spec.init.from_model), cache_dir), labels)
    elif spec.init.pretrained:
        model, processor = _pretrained(str(spec.init.pretrained), labels)
    else:
        model, processor = _from_config(spec.init, labels)
    model.save_pretrained(out_dir / "model")
    processor.save_pretrained(out_dir / "model")
    if uses_lora(spec):
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(derive_seed(spec.seed, "adapters"))
        lora = spec.lora
        with known_notices_silenced():
            adapted = get_peft_model(model, LoraConfig(
                r=int(lora.rank), lora_alpha=int(lora.alpha), lora_dropout=float(lora.dropout),
                target_modules=list(lora.target_modules), modules_to_save=list(lora.head_modules),
            ))
        adapted.save_pretrained(out_dir / "adapter")


def _base_location(name: str, cache_dir) -> str:
    from medexp.config import model_config
    from medexp.models import model_location

    return model_location(model_config(name), cache_dir)


def _pretrained(location: str, labels: dict):
    """A checkpoint with its head replaced by a freshly drawn one for the dataset's classes."""
    import logging

    from transformers import AutoImageProcessor, AutoModelForImageClassification
    from transformers.utils import logging as hf_logging

    # transformers reports the replaced head as "newly initialized" weights: that is the point
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity(logging.ERROR)
    try:
        model = AutoModelForImageClassification.from_pretrained(location, ignore_mismatched_sizes=True, **labels)
    finally:
        hf_logging.set_verbosity(verbosity)
    # A head of the same shape would have been kept: draw it afresh whatever its shape.
    head = getattr(model, "classifier", None)
    if head is None:
        raise ValueError(f"{location}: the classifier has no `classifier` head module to replace")
    for module in head.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    return model, AutoImageProcessor.from_pretrained(location)


def _from_config(init, labels: dict):
    """An architecture built from its transformers config, with a resize-and-normalise processor."""
    from transformers import AutoConfig, AutoModelForImageClassification, ViTImageProcessor

    side = int(init.image_size)
    # image_size first: ViT-like configs size their position embeddings by it (others ignore it)
    values = {"image_size": side, **OmegaConf.to_container(init.architecture, resolve=True), **labels}
    config = AutoConfig.for_model(init.model_type, **values)
    processor = ViTImageProcessor(size={"height": side, "width": side}, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    return AutoModelForImageClassification.from_config(config), processor
