"""Marian MT back-translation through transformers (``MarianMTModel``, ``MarianTokenizer``).

English -> Chinese -> English by default, with Helsinki-NLP's opus-mt-en-zh (which needs the
``>>cmn_Hans<<`` target token for simplified Chinese) and opus-mt-zh-en. Each direction is a hub
id or a local ``save_pretrained`` directory, with an optional revision and source prefix.
Decoding never samples: beam search with ``num_beams`` beams (1 = greedy), at most
``max_length`` new tokens; source texts longer than ``max_length`` tokens are truncated and
counted in a warning. Models load on first use, so a complete cache entry never loads them.

Offline: download both checkpoints where the hub is reachable
(``huggingface-cli download Helsinki-NLP/opus-mt-en-zh --local-dir <dir>``), copy the folders and
point ``translator.forward.model`` / ``translator.backward.model`` at them.
"""

from __future__ import annotations

import importlib.metadata
import logging
from pathlib import Path
from typing import Any

from medexp.translators.base import CachedTextTranslator

log = logging.getLogger(__name__)

MARIAN_VERSION = "marian-v1"  # bump when a change alters any translation
# The files of a Marian checkpoint that loading reads (weights in either format).
MARIAN_FILES = ["config.json", "generation_config.json", "*.safetensors", "pytorch_model.bin", "source.spm",
                "target.spm", "vocab.json", "target_vocab.json", "tokenizer_config.json", "special_tokens_map.json"]


def _sacremoses_version() -> str | None:
    """MarianTokenizer normalises punctuation with sacremoses when it is installed: its version
    can change a translation, so it belongs to the cache key."""
    try:
        return importlib.metadata.version("sacremoses")
    except importlib.metadata.PackageNotFoundError:
        return None


class MarianTranslator(CachedTextTranslator):
    def __init__(self, cfg, cache_dir: str | Path):
        super().__init__(cfg.name, cache_dir, int(cfg.shard_size))
        self.cfg = cfg
        self._loaded: dict[str, Any] = {}

    def settings(self) -> dict[str, Any]:
        from medexp.models import checkpoint_fingerprint

        def direction(which: str) -> dict[str, Any]:
            spec = self._direction(which)
            return {"model": spec.model, "revision": spec.revision, "prefix": spec.prefix,
                    "weights": checkpoint_fingerprint(spec.model, self.cache_dir)}

        return {"kind": "marian", "code": MARIAN_VERSION, "forward": direction("forward"),
                "backward": direction("backward"), "max_length": int(self.cfg.max_length),
                "num_beams": int(self.cfg.num_beams), "sacremoses": _sacremoses_version()}

    def round_trip(self, texts: list[str]) -> list[tuple[str, str]]:
        pivots = self._translate("forward", texts)
        backs = self._translate("backward", pivots)
        return list(zip(pivots, backs))

    # ------------------------------------------------------------------ loading
    def _direction(self, which: str):
        return getattr(self.cfg, which)

    def _load(self, which: str):
        if which in self._loaded:
            return self._loaded[which]
        from transformers import MarianMTModel, MarianTokenizer

        from medexp.models.hf import pick_device

        spec = self._direction(which)
        location = self._local_copy(which)
        try:
            tokenizer = MarianTokenizer.from_pretrained(location)
            model = MarianMTModel.from_pretrained(location)
        except (OSError, ValueError, TypeError) as error:
            raise OSError(f"translator.{which}.model={spec.model!r}: {location} does not hold a Marian checkpoint "
                          f"(config.json, weights, source.spm, target.spm, vocab.json): "
                          f"{type(error).__name__}: {error}") from error
        _check_prefix(tokenizer, spec.prefix, f"translator.{which}.prefix", str(spec.model))
        device = pick_device(self.cfg.device)
        model.to(device).eval()
        self._loaded[which] = (tokenizer, model, device)
        return self._loaded[which]

    def _local_copy(self, which: str) -> str:
        """The checkpoint's folder: the configured directory, or the hub snapshot (fetched once
        into the huggingface_hub cache); without either, what to download and where to point."""
        spec = self._direction(which)
        where = f"translator.{which}.model"
        location = str(spec.model)
        if Path(location).expanduser().is_dir():
            return str(Path(location).expanduser())
        if _looks_like_path(location):
            raise FileNotFoundError(f"{where}={location!r}: no such directory (a local Marian checkpoint is a "
                                    "folder written by save_pretrained or huggingface-cli download)")
        from huggingface_hub import snapshot_download

        try:
            return snapshot_download(location, revision=spec.revision, allow_patterns=MARIAN_FILES)
        except Exception as error:  # offline, no network, auth, missing repo: all end in the same advice
            revision = f" --revision {spec.revision}" if spec.revision else ""
            raise OSError(
                f"translator={self.name}: cannot load the {which} Marian model {location!r} "
                f"({type(error).__name__}: {error}). Without hub access, download it where the hub is reachable:\n"
                f"  huggingface-cli download {location}{revision} --local-dir <dir>\n"
                f"copy <dir> to this machine and set {where}=<dir> (in a detector: detector.{where}=<dir>)"
            ) from error

    # ------------------------------------------------------------------ decoding
    def _translate(self, which: str, texts: list[str]) -> list[str]:
        import torch

        tokenizer, model, device = self._load(which)
        prefix = self._direction(which).prefix
        batch_size, max_length = int(self.cfg.batch_size), int(self.cfg.max_length)
        out: list[str] = []
        truncated = 0
        for start in range(0, len(texts), batch_size):
            batch = [f"{prefix} {text}" if prefix else text for text in texts[start:start + batch_size]]
            truncated += sum(len(ids) > max_length for ids in tokenizer(batch)["input_ids"])
            encoded = tokenizer(batch, return_tensors="pt", padding=True, truncation=True, max_length=max_length)
            encoded = {key: value.to(device) for key, value in encoded.items()}
            with torch.inference_mode():
                generated = model.generate(**encoded, num_beams=int(self.cfg.num_beams), do_sample=False,
                                           max_new_tokens=max_length)
            out.extend(text.strip() for text in tokenizer.batch_decode(generated, skip_special_tokens=True))
        if truncated:
            log.warning("translator=%s (%s): %d of %d texts were longer than max_length=%d tokens and were truncated",
                        self.name, which, truncated, len(texts), max_length)
        return out


def _looks_like_path(location: str) -> bool:
    return location.startswith((".", "/", "~")) or Path(location).is_absolute() or location.count("/") > 1


def _check_prefix(tokenizer, prefix: str | None, where: str, location: str) -> None:
    """A target-language token (``>>id<<``) must be one the model knows."""
    if not prefix or not (prefix.startswith(">>") and prefix.endswith("<<")):
        return
    codes = list(getattr(tokenizer, "supported_language_codes", []) or [])
    if prefix not in codes:
        known = f"it knows {codes[:12]}{' ...' if len(codes) > 12 else ''}" if codes else \
            "it has no target-language tokens; set the prefix to null"
        raise ValueError(f"{where}={prefix!r} is not a target-language token of {location!r}: {known}")
