"""Embeddings of distinct image contents, stored as float16 shards in a content-addressed cache.

Images are items: files are grouped by the SHA-256 of their bytes (:func:`distinct_images`), and
each distinct content is embedded once, however many questions or files use it (a VQA split
holds each image once per question). The cache entry's items are the digests in first-occurrence
order and its key is the embedder's own key plus those digests, so every benchmark or corpus
with the same images shares it, and a replaced file or a different backbone never reuses stale
vectors. Shards of ``shard_size`` consecutive images are written, verified and resumed by
:mod:`medexp.kernel.shards`.
Float16 halves the footprint (1.85M x 1152 floats = 4.3 GB), and shards are memory-mapped, so
exact search streams a corpus larger than RAM block by block; a subset (the corpus deduplicated)
stays mapped too, read through the row numbers it keeps (:class:`KeptRows`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from medexp.kernel.hashing import stable_hash
from medexp.images.embedders import Embedder

_STORE_VERSION = 2  # 2: items are distinct byte digests, not example ids


class KeptRows:
    """The rows ``kept`` (sorted positions) of a stored shard, read from it on access.

    A shard that loses rows to deduplication is not copied: at PMC-OA scale, with a copy spread
    over every shard, copying would hold the whole float16 corpus (4.3 GB) in memory where the
    memory map reads one search block at a time.
    """

    def __init__(self, stored: np.ndarray, kept: np.ndarray):
        self.stored = stored
        self.kept = np.asarray(kept, dtype=np.int64)

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.kept), int(self.stored.shape[1])

    @property
    def dtype(self) -> np.dtype:
        return self.stored.dtype

    def __len__(self) -> int:
        return len(self.kept)

    def __getitem__(self, index) -> np.ndarray:
        """The kept rows at ``index`` (a slice or positions), read into memory."""
        return np.asarray(self.stored[self.kept[index]])


@dataclass
class EmbeddingSet:
    """Unit-norm vectors of ``ids`` (in order), held as float16 blocks (arrays, memory maps, or
    the kept rows of either)."""

    ids: list[str]
    shards: list[np.ndarray | KeptRows] = field(repr=False)

    def __post_init__(self) -> None:
        if not self.shards:
            raise ValueError("an embedding set needs at least one vector")
        dims = {shard.shape[1] for shard in self.shards}
        if len(dims) != 1:
            raise ValueError(f"shards disagree on the vector width: {sorted(dims)}")
        total = sum(len(shard) for shard in self.shards)
        if total != len(self.ids):
            raise ValueError(f"{total} vectors for {len(self.ids)} ids")

    @classmethod
    def from_array(cls, ids: Sequence[str], vectors: np.ndarray) -> "EmbeddingSet":
        """Wrap in-memory vectors (normalised here, stored as float16 like the cache)."""
        return cls(list(ids), [normalise(np.asarray(vectors, dtype=np.float32)).astype(np.float16)])

    @property
    def dim(self) -> int:
        return int(self.shards[0].shape[1])

    def __len__(self) -> int:
        return len(self.ids)

    def blocks(self, block_size: int) -> Iterator[tuple[int, np.ndarray]]:
        """``(offset, float32 block)`` pairs covering every vector once, re-normalised after float16."""
        offset = 0
        for shard in self.shards:
            for start in range(0, len(shard), block_size):
                block = np.asarray(shard[start : start + block_size], dtype=np.float32)
                yield offset + start, normalise(block, out=block)  # in place: one block in memory
            offset += len(shard)

    def subset(self, indices: Sequence[int]) -> "EmbeddingSet":
        """The vectors at sorted, distinct ``indices``: a shard wholly kept stays as it is, one
        that loses rows is read through the rows it keeps (:class:`KeptRows`); nothing is copied."""
        indices = np.asarray(indices, dtype=np.int64)
        if np.any(np.diff(indices) <= 0):
            raise ValueError("subset indices must be sorted and distinct")
        shards, start = [], 0
        for shard in self.shards:
            local = indices[(indices >= start) & (indices < start + len(shard))] - start
            if len(local) == len(shard):
                shards.append(shard)
            elif len(local):
                # the kept rows of kept rows index the stored shard directly: one read per access
                stored, kept = (shard.stored, shard.kept[local]) if isinstance(shard, KeptRows) else (shard, local)
                shards.append(KeptRows(stored, kept))
            start += len(shard)
        return EmbeddingSet([self.ids[i] for i in indices], shards)

    def rows(self, indices: Sequence[int]) -> np.ndarray:
        """The float32 vectors at ``indices`` (in that order)."""
        return normalise(self.stored(indices).astype(np.float32))

    def stored(self, indices: Sequence[int]) -> np.ndarray:
        """The float16 vectors at ``indices`` (in that order), exactly as stored."""
        indices = np.asarray(indices, dtype=np.int64)
        starts = np.cumsum([0] + [len(shard) for shard in self.shards])
        out = np.empty((len(indices), self.dim), dtype=np.float16)
        shard_of = np.searchsorted(starts, indices, side="right") - 1
        for shard_index in np.unique(shard_of):
            picked = shard_of == shard_index
            out[picked] = self.shards[shard_index][indices[picked] - starts[shard_index]]
        return out


def vector_keys(vectors: EmbeddingSet) -> list[bytes]:
    """A hash of each stored float16 vector's bytes, in order: equal keys are identical vectors
    (two files with the same perceptual hash, a lossless re-encode with the same pixels)."""
    keys = []
    for shard in vectors.shards:
        for start in range(0, len(shard), 4096):  # one slice of a memory map in memory at a time
            block = np.ascontiguousarray(shard[start : start + 4096]) + np.float16(0)  # -0 + 0 = +0: one zero
            keys.extend(hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in block)
    return keys


@dataclass(frozen=True)
class DistinctImages:
    """Image files grouped by content (the SHA-256 of their bytes)."""

    digests: list[str]  # the distinct digests, in order of first occurrence
    paths: list[Path]  # the first file holding each digest
    inverse: np.ndarray  # for each file given, the index of its digest

    def __len__(self) -> int:
        return len(self.digests)


def distinct_images(paths: Sequence[str | Path], cache_dir: str | Path) -> DistinctImages:
    """Group ``paths`` by the SHA-256 of their bytes (remembered by path, size and mtime)."""
    from medexp.benchmarks.digests import DigestCache

    first: dict[str, int] = {}
    firsts: list[Path] = []
    inverse = np.empty(len(paths), dtype=np.int64)
    for row, (path, digest) in enumerate(zip(paths, DigestCache(cache_dir).digests(paths))):
        if digest not in first:
            first[digest] = len(firsts)
            firsts.append(Path(path))
        inverse[row] = first[digest]
    return DistinctImages(list(first), firsts, inverse)


def normalise(vectors: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero); ``out=vectors`` works in place."""
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))[:, None]  # no squared copy of the block
    return np.divide(vectors, np.where(norms > 0, norms, 1.0).astype(vectors.dtype), out=out)


def embed_images(
    embedder: Embedder,
    images: DistinctImages,
    cache_dir: str | Path,
    batch_size: int,
    shard_size: int,
    desc: str = "embedding",
) -> EmbeddingSet:
    """Embed each distinct image once (cached, resumable, verified); the set's ids are the digests.

    The cache key holds the embedder and the images' contents (byte digests), never their paths;
    ``vectors.rows(images.inverse)`` gives one row per file of :func:`distinct_images`.
    """
    from medexp.kernel.shards import InvalidShard, ShardedEntry

    if not len(images):
        raise ValueError(f"{desc}: no images to embed")
    if batch_size < 1 or shard_size < 1:
        raise ValueError(f"batch_size and shard_size must be >= 1, got {batch_size}, {shard_size}")
    ids, paths = images.digests, images.paths
    key = {"version": _STORE_VERSION, "embedder": embedder.cache_key(), "images": stable_hash(ids, 32)}

    def compute(start: int, stop: int, path: Path) -> None:
        vectors = np.concatenate(
            [embedder.embed(paths[i : min(i + batch_size, stop)]) for i in range(start, stop, batch_size)]
        )
        _check_finite(vectors, paths[start:stop])
        with open(path, "wb") as handle:
            np.save(handle, vectors.astype(np.float16))

    def read(path: Path, shard_ids: list[str]) -> np.ndarray:
        shard = np.load(path, mmap_mode="r")
        if shard.shape != (len(shard_ids), embedder.dim) or shard.dtype != np.float16:
            raise InvalidShard(f"shape {shard.shape} {shard.dtype}, expected ({len(shard_ids)}, {embedder.dim}) float16")
        return shard

    entry = ShardedEntry(Path(cache_dir) / "embeddings", key, ids, shard_size, ".npy")
    return EmbeddingSet(list(ids), entry.load(compute, read, desc, unit="image"))


def _check_finite(vectors: np.ndarray, paths: Sequence[Path]) -> None:
    bad = ~np.isfinite(vectors).all(axis=1)
    if bad.any():
        first = [str(paths[i]) for i in np.flatnonzero(bad)[:3]]
        raise ValueError(f"embedder returned non-finite vectors for {int(bad.sum())} image(s), e.g. {first}")
