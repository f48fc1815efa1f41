"""Schemas of the image detector: embedders (conf/embedder/), corpora (conf/corpus/), indexes."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, List, Optional

from omegaconf import MISSING

from medexp.config.ranges import at_least, probabilities, probability
from medexp.config.schemas.bench import BenchConfig
from medexp.config.schemas.detector import DetectorBase


@dataclass
class EmbedderBase:
    """An image embedder (conf/embedder/); vectors are cached per embedder and image list."""

    name: str = MISSING
    batch_size: int = at_least(64, 1)
    shard_size: int = at_least(4096, 1)  # images per float16 cache shard: the unit an interrupted run resumes from


@dataclass
class OpenClipEmbedderConfig(EmbedderBase):
    """An open_clip image tower; SigLIP preprocessing (mean = std = 0.5, bicubic squash) by default."""

    model: str = MISSING  # open_clip architecture, e.g. ViT-B-16-SigLIP
    pretrained: Optional[str] = None  # tag ("webli", from the hub) or a local weights file; None: random
    model_config: Optional[str] = None  # a JSON architecture file to register first (named by its stem)
    dim: Optional[int] = at_least(None, 1)  # expected embedding width, checked once the model is built
    image_mean: List[float] = field(default_factory=lambda: [0.5, 0.5, 0.5])
    image_std: List[float] = field(default_factory=lambda: [0.5, 0.5, 0.5])
    interpolation: str = "bicubic"
    resize_mode: str = "squash"
    device: str = "auto"  # "auto" picks cuda when available, else cpu
    loader_threads: int = at_least(4, 1)  # threads decoding and resizing images


@dataclass
class PHashEmbedderConfig(EmbedderBase):
    """``imagehash.phash`` as a +-1 vector: no weights; cosine distance = 2 Hamming / bits."""

    hash_size: int = at_least(32, 2)  # hash_size^2 bits: the lowest DCT frequencies
    highfreq_factor: int = at_least(4, 1)  # images are reduced to hash_size * highfreq_factor pixels a side
    batch_size: int = at_least(256, 1)


@dataclass
class CorpusConfig:
    """A reference image corpus (conf/corpus/): the images of a benchmark source."""

    name: str = MISSING
    source: BenchConfig = MISSING  # read with the benchmark loaders; its example images form the corpus


class IndexKind(str, Enum):
    exact = "exact"  # brute force over float16 shards, block by block (memory-bounded)
    bf16 = "bf16"  # exact answers too: bfloat16 products (AMX, AVX-512 BF16) find candidates, float64 re-ranks them
    ivf = "ivf"  # faiss IVF-flat: approximate, recall@1 measured and logged
    hnsw = "hnsw"  # faiss HNSW-flat: approximate, recall@1 measured and logged


@dataclass
class IndexConfig:
    kind: IndexKind = IndexKind.exact
    block_size: int = at_least(65536, 1)  # corpus vectors per search block (exact) or per add call
    ivf_nlist: Optional[int] = at_least(None, 1)  # None: 4 sqrt(corpus size)
    ivf_nprobe: int = at_least(16, 1)
    hnsw_m: int = at_least(32, 2)
    hnsw_ef_search: int = at_least(128, 1)
    recall_sample: int = at_least(1000, 1)  # queries checked against exact search (approximate kinds only)
    gpu: bool = True  # use faiss-gpu when it is installed and sees a GPU


@dataclass
class ImageNNConfig(DetectorBase):
    """Image near-neighbour overlap (Detector 1); ``alpha`` is the level of the flag-count test."""

    example_fields: ClassVar[tuple[str, ...]] = ()  # images are compared as images: no text field needed
    embedder: Any = MISSING  # an embedder config; its schema comes from its own defaults list
    corpus: CorpusConfig = MISSING
    tau_alpha: float = probability(0.01)  # tau = the tau_alpha-quantile of corpus-to-corpus NN distances
    calibration_size: int = at_least(5000, 1)  # corpus images sampled for tau (capped at the corpus size)
    sweep_alphas: List[float] = probabilities(lambda: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1])
    index: IndexConfig = field(default_factory=IndexConfig)
    max_panels: int = at_least(20, 0)  # side-by-side adjudication panels of the closest flagged pairs
