"""Nearest-neighbour search over unit vectors: inner product = cosine similarity.

- :class:`ExactSearch` is brute force, streamed block by block over the float16 shards of an
  :class:`~medexp.images.store.EmbeddingSet` with a running top-k merge, so memory stays at one
  float32 block whatever the corpus size; it runs on the GPU when faiss-gpu sees one.
- :class:`ApproximateSearch` wraps a faiss IVF or HNSW index over the whole corpus. It is only
  trustworthy with a measured recall: :func:`recall_at_1` compares it with exact search.

:func:`nearest` returns cosine distances (1 - similarity) to the nearest neighbour, optionally
excluding each query's own corpus row (the self-match of threshold calibration). The index only
*finds* the neighbour; its distance is then recomputed in float64 from the two stored vectors
(:func:`cosine_distances`), so identical vectors are at distance exactly 0 and distinct ones at a
positive distance, never the float32 residue of ``1 - <q, q>`` (about 5e-7 for float16 vectors).
"""

from __future__ import annotations

import logging
from typing import Protocol

import numpy as np

from medexp.images.store import EmbeddingSet

log = logging.getLogger(__name__)


class Searcher(Protocol):
    corpus: EmbeddingSet

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(similarities, corpus indices)``, each ``(len(queries), k)``, best first."""


def _gpu_resources(use_gpu: bool):
    """faiss GPU resources when asked for and available (faiss-gpu and a visible GPU), else None."""
    import faiss

    if use_gpu and hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
        return faiss.StandardGpuResources()
    return None


class ExactSearch:
    """Exact inner-product search, one corpus block at a time."""

    def __init__(self, corpus: EmbeddingSet, block_size: int = 65536, use_gpu: bool = True):
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.corpus = corpus
        self.block_size = block_size
        self.gpu = _gpu_resources(use_gpu)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = min(k, len(self.corpus))
        best_sim = np.full((len(queries), k), -np.inf, dtype=np.float32)
        best_idx = np.full((len(queries), k), -1, dtype=np.int64)
        for offset, block in self.corpus.blocks(self.block_size):
            kb = min(k, len(block))
            if self.gpu is not None:
                sim, idx = faiss.knn_gpu(self.gpu, queries, block, kb, metric=faiss.METRIC_INNER_PRODUCT)
            else:
                sim, idx = faiss.knn(queries, block, kb, metric=faiss.METRIC_INNER_PRODUCT)
            best_sim, best_idx = _merge(best_sim, best_idx, sim, idx + offset, k)
        return best_sim, best_idx


def _merge(sim_a, idx_a, sim_b, idx_b, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of two candidate lists per row; ties go to the smaller corpus index (deterministic)."""
    sims = np.concatenate([sim_a, sim_b], axis=1)
    idxs = np.concatenate([idx_a, idx_b], axis=1)
    missing = idxs < 0
    order = np.lexsort((np.where(missing, np.iinfo(np.int64).max, idxs), -sims), axis=1)[:, :k]
    return np.take_along_axis(sims, order, axis=1), np.take_along_axis(idxs, order, axis=1)


class ApproximateSearch:
    """A faiss IVF-flat or HNSW-flat index (inner product) over the whole corpus, in float32.

    IVF: ``nlist`` k-means cells (default 4 sqrt(N)) trained on a seeded sample, ``nprobe``
    cells visited per query. HNSW: ``m`` links per node, ``ef_search`` candidates per query; the
    graph is built single-threaded, because a parallel build depends on thread timing.
    """

    def __init__(self, corpus: EmbeddingSet, kind: str, seed: int, block_size: int = 65536,
                 nlist: int | None = None, nprobe: int = 16, hnsw_m: int = 32, ef_search: int = 128,
                 use_gpu: bool = True):
        import faiss

        self.corpus = corpus
        n, dim = len(corpus), corpus.dim
        if kind == "ivf":
            nlist = nlist or max(1, int(4 * np.sqrt(n)))
            if nlist > n:
                raise ValueError(f"ivf needs nlist <= corpus size ({n}), got {nlist}")
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
            index.cp.seed = seed % (2**31 - 1)  # faiss takes a signed 32-bit seed
            rng = np.random.default_rng(seed)
            train = np.sort(rng.choice(n, size=min(n, 64 * nlist), replace=False))
            index.train(corpus.rows(train))
            index.nprobe = min(nprobe, nlist)
            gpu = _gpu_resources(use_gpu)
            if gpu is not None:
                index = faiss.index_cpu_to_gpu(gpu, 0, index)
            self._add(index, corpus, block_size)
        elif kind == "hnsw":
            index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efSearch = ef_search
            threads = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(1)
            try:
                self._add(index, corpus, block_size)
            finally:
                faiss.omp_set_num_threads(threads)
        else:
            raise ValueError(f"unknown approximate index kind {kind!r}; expected ivf or hnsw")
        self.index = index

    @staticmethod
    def _add(index, corpus: EmbeddingSet, block_size: int) -> None:
        for _, block in corpus.blocks(block_size):
            index.add(block)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)


def build_searcher(corpus: EmbeddingSet, index_cfg, seed: int) -> Searcher:
    """The searcher an ``index`` config asks for (exact, ivf or hnsw)."""
    from medexp.config.schemas import IndexKind

    kind = IndexKind(index_cfg.kind)
    if kind is IndexKind.exact:
        return ExactSearch(corpus, index_cfg.block_size, index_cfg.gpu)
    log.info("building a %s index over %d vectors", kind.value, len(corpus))
    return ApproximateSearch(
        corpus, kind.value, seed, index_cfg.block_size, index_cfg.ivf_nlist, index_cfg.ivf_nprobe,
        index_cfg.hnsw_m, index_cfg.hnsw_ef_search, index_cfg.gpu,
    )


def nearest(searcher: Searcher, queries: np.ndarray, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Cosine distance to, and corpus index of, each query's nearest neighbour.

    ``exclude[i]`` is a corpus index that query ``i`` may not match (its own row; -1 for none):
    two neighbours are fetched and the first other one is kept. A duplicate of the query
    elsewhere in the corpus is still found, at distance 0.
    """
    _, idxs = searcher.search(queries, 1 if exclude is None else 2)
    if exclude is None:
        pick = np.zeros(len(queries), dtype=np.int64)
    else:
        exclude = np.asarray(exclude, dtype=np.int64)
        if idxs.shape[1] < 2:
            raise ValueError("self-excluded search needs a corpus of at least two vectors")
        pick = (idxs[:, 0] == exclude).astype(np.int64)
    chosen = idxs[np.arange(len(queries)), pick]
    if (chosen < 0).any():
        raise RuntimeError(f"the index returned no neighbour for {int((chosen < 0).sum())} queries")
    return cosine_distances(queries, searcher.corpus.rows(chosen)), chosen


def cosine_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine distance ``1 - cos = |a/|a| - b/|b||^2 / 2``, in float64.

    The squared-difference form is exactly 0 for identical rows (the same operations on the same
    numbers) and positive for any two different directions, where ``1 - <a, b>`` in float32 leaves
    a rounding residue of either sign. A zero row is at distance 0.5 from any non-zero row.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"cosine distances need rows of one shape, got {a.shape} and {b.shape}")

    def unit(rows: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms > 0, norms, 1.0)

    difference = unit(a) - unit(b)
    return 0.5 * np.einsum("ij,ij->i", difference, difference)


def recall_at_1(approximate: Searcher, exact: Searcher, queries: np.ndarray, exclude: np.ndarray | None = None,
                tolerance: float = 1e-5) -> float:
    """Share of queries whose approximate nearest neighbour is as close as the exact one (ties count)."""
    approx_distance, _ = nearest(approximate, queries, exclude)
    exact_distance, _ = nearest(exact, queries, exclude)
    return float(np.mean(approx_distance <= exact_distance + tolerance))
