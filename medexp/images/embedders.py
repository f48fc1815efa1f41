"""Image embedders: every one maps image files to L2-normalised float32 rows.

- :class:`PerceptualHash` needs no weights: ``imagehash.phash`` (a DCT perceptual hash) turned
  into a +-1 vector, so the cosine distance between two images is ``2 * Hamming / bits`` (0 for
  identical hashes: an exact duplicate as far as the hash can tell).
- :class:`OpenClipEmbedder` runs an open_clip image tower (SigLIP ``ViT-B-16-SigLIP`` 768-d,
  ``ViT-SO400M-14-SigLIP`` 1152-d, pretrained ``webli``) with SigLIP normalisation.

:func:`load_embedder` picks the embedder from the structured type of an ``embedder`` config.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from medexp.benchmarks.images import read_image


class Embedder(Protocol):
    dim: int
    resolution: float  # distances below it are ties (a tau below it is degenerate)

    def cache_key(self) -> dict[str, Any]:
        """Everything that changes the vectors (the embedding-cache key)."""

    def embed(self, paths: Sequence[Path]) -> np.ndarray:
        """``(len(paths), dim)`` float32 rows of unit norm, in the order of ``paths``."""


def load_embedder(embedder_cfg) -> Embedder:
    """Build the embedder an ``embedder`` config (conf/embedder/*.yaml) describes."""
    from omegaconf import OmegaConf

    from medexp.config.schemas import OpenClipEmbedderConfig, PHashEmbedderConfig

    schema = OmegaConf.get_type(embedder_cfg)
    if schema is PHashEmbedderConfig:
        return PerceptualHash(embedder_cfg.hash_size, embedder_cfg.highfreq_factor)
    if schema is OpenClipEmbedderConfig:
        return OpenClipEmbedder(embedder_cfg)
    raise ValueError(
        f"embedder {embedder_cfg.get('name')!r} has no known schema ({getattr(schema, '__name__', schema)}); "
        "its YAML must start with `defaults: [/schema/embedder@_here_: <open_clip|phash>, _self_]`"
    )


class PerceptualHash:
    """``imagehash.phash`` of the grey image as a unit vector of +-1 / sqrt(bits).

    The image is reduced to ``hash_size * highfreq_factor`` pixels a side, transformed with a
    2-D DCT, and the ``hash_size x hash_size`` block of lowest frequencies is compared with its
    median: one bit per coefficient. Low frequencies survive resizing and JPEG re-encoding. On
    the demo corpus it recovers the planted near-duplicates as well as the DCT hash medexp used
    to compute itself (NOTES: AUC 0.9998 against 0.9996), at the same cost.
    """

    def __init__(self, hash_size: int = 32, highfreq_factor: int = 4):
        if hash_size < 2 or highfreq_factor < 1:
            raise ValueError(f"phash needs hash_size >= 2 and highfreq_factor >= 1, got {hash_size}, {highfreq_factor}")
        self.hash_size = hash_size
        self.highfreq_factor = highfreq_factor
        self.dim = hash_size * hash_size

    @property
    def resolution(self) -> float:
        """Half the smallest non-zero distance (one bit of ``dim``): a smaller distance is a tie."""
        return 1.0 / self.dim

    def cache_key(self) -> dict[str, Any]:
        import imagehash

        return {"kind": "phash", "implementation": f"imagehash {imagehash.__version__}", "hash_size": self.hash_size,
                "highfreq_factor": self.highfreq_factor}

    def bits(self, image) -> np.ndarray:
        """The hash of a PIL image as ``dim`` booleans."""
        import imagehash

        return imagehash.phash(image.convert("L"), self.hash_size, self.highfreq_factor).hash.ravel()

    def embed(self, paths: Sequence[Path]) -> np.ndarray:
        signs = np.empty((len(paths), self.dim), dtype=np.float32)
        for row, path in enumerate(paths):
            signs[row] = np.where(self.bits(read_image(path, "L")), 1.0, -1.0)
        return signs / np.float32(np.sqrt(self.dim))


class OpenClipEmbedder:
    """An open_clip image tower; only ``encode_image`` is used, so no tokenizer is needed.

    The model is loaded on first use, so a fully cached embedding never loads the weights.
    """

    def __init__(self, cfg):
        self.cfg = cfg

    @functools.cached_property
    def _loaded(self):
        width = _image_width(self.cfg)
        if self.cfg.dim is not None and self.cfg.dim != width:
            raise ValueError(f"embedder {self.cfg.name}: {self.cfg.model} gives {width}-d vectors, config says dim={self.cfg.dim}")
        return _load_open_clip(self.cfg)

    @property
    def dim(self) -> int:
        return int(self.cfg.dim) if self.cfg.dim is not None else _image_width(self.cfg)

    # Storing a unit vector in float16 moves each component by at most 2^-11 of itself, so two
    # stored copies of one vector can lie up to |2 * 2^-11|^2 / 2 = 2^-21 (4.8e-7) apart: a
    # smaller distance cannot be told from a tie.
    resolution = float(np.finfo(np.float16).eps) ** 2 / 2

    def cache_key(self) -> dict[str, Any]:
        cfg = self.cfg
        return {
            "kind": "open_clip",
            "model": cfg.model,
            "model_config": _file_digest(cfg.model_config) if cfg.model_config else None,
            "pretrained": _weights_identity(cfg.pretrained),
            "image_mean": list(cfg.image_mean),
            "image_std": list(cfg.image_std),
            "interpolation": cfg.interpolation,
            "resize_mode": cfg.resize_mode,
        }

    def embed(self, paths: Sequence[Path]) -> np.ndarray:
        from concurrent.futures import ThreadPoolExecutor

        import torch

        model, preprocess, device = self._loaded

        def load(path: Path):
            return preprocess(read_image(path, "RGB"))

        # decoding and resizing release the GIL, so threads keep the model fed
        with ThreadPoolExecutor(max_workers=max(1, self.cfg.loader_threads)) as pool:
            pixels = torch.stack(list(pool.map(load, paths)))
        with torch.inference_mode():
            features = model.encode_image(pixels.to(device), normalize=True)
        return features.float().cpu().numpy()


_RANDOM_INIT_SEED = 0  # random weights (pretrained: null) are drawn reproducibly; for tests only


def _architecture(cfg) -> dict[str, Any]:
    """The open_clip architecture ``cfg.model`` names (a ``model_config`` file registered first)."""
    import open_clip

    if cfg.model_config:
        # a JSON architecture file (e.g. a tiny test model), registered under its file stem
        open_clip.add_model_config(str(Path(cfg.model_config).expanduser()))
    architecture = open_clip.get_model_config(cfg.model)
    if architecture is None:
        raise ValueError(f"embedder {cfg.name}: unknown open_clip model {cfg.model!r} (see open_clip.list_models())")
    return architecture


def _image_width(cfg) -> int:
    """The width of ``encode_image``: the architecture's ``embed_dim``, the space images and texts
    share. Read from the architecture because a timm tower (every SigLIP model) has no
    ``output_dim`` attribute, unlike open_clip's own vision transformer."""
    return int(_architecture(cfg)["embed_dim"])


def _load_open_clip(cfg):
    import open_clip
    import torch

    _architecture(cfg)  # registers a model_config file, and names an unknown model before any download
    device = cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    pretrained = str(Path(cfg.pretrained).expanduser()) if _is_path(cfg.pretrained) else cfg.pretrained
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_RANDOM_INIT_SEED)
            model, _, preprocess = open_clip.create_model_and_transforms(
                cfg.model,
                pretrained=pretrained,
                device=device,
                image_mean=tuple(cfg.image_mean),
                image_std=tuple(cfg.image_std),
                image_interpolation=cfg.interpolation,
                image_resize_mode=cfg.resize_mode,
            )
    except RuntimeError as error:
        if pretrained and not os.path.isfile(pretrained):
            raise RuntimeError(_offline_help(cfg, error)) from error
        raise
    model.eval()
    return model, preprocess, device


def _offline_help(cfg, error: Exception) -> str:
    return (
        f"embedder {cfg.name}: could not load open_clip weights {cfg.model}/{cfg.pretrained} ({error}). "
        "This machine may be offline. On a connected machine run\n"
        f"  python -c \"import open_clip; open_clip.create_model_and_transforms('{cfg.model}', pretrained='{cfg.pretrained}')\"\n"
        "and copy the Hugging Face cache (~/.cache/huggingface, or $HF_HOME) here, or point the embedder at a "
        "local weights file: embedder.pretrained=/path/to/open_clip_pytorch_model.bin "
        "(override key: detector.embedder.pretrained)."
    )


def _is_path(value: str | None) -> bool:
    return bool(value) and (os.sep in value or value.endswith((".bin", ".pt", ".pth", ".safetensors")))


def _weights_identity(pretrained: str | None) -> Any:
    """A tag as is; a local weights file by path, size and modification time (hashing GBs is too slow)."""
    if not _is_path(pretrained):
        return pretrained
    path = Path(pretrained).expanduser().resolve()
    stat = path.stat()
    return {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).expanduser().read_bytes()).hexdigest()

