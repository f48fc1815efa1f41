"""Nearest-neighbour search over unit vectors: inner product = cosine similarity.

- :class:`ExactSearch` is brute force, streamed block by block over the float16 shards of an
  :class:`~medexp.images.store.EmbeddingSet` with a running top-k merge, so memory stays at one
  float32 block whatever the corpus size; it runs on the GPU when faiss-gpu sees one.
- :class:`Bfloat16Search` finds the same neighbours as exact search through bfloat16 matrix products
  (AMX and AVX-512 BF16 units, twice to many times the float32 rate on CPUs that have them), then
  re-ranks in float64 every candidate that a proven error bound cannot rule out; a query whose
  candidates overflow falls back to exact search. Its answers are exact, not approximate.
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


# bfloat16 keeps 8 significant bits: unit roundoff 2^-8 (round to nearest). Products of bfloat16
# numbers are exact in float32 and are summed there (unit roundoff 2^-24).
_BF16_UNIT = 2.0 ** -8
_FP32_UNIT = 2.0 ** -24
_SLACK = 1e-9  # the float64 arithmetic of the bound itself


def _rounded(rows):
    """Rows rounded to bfloat16, then upper bounds (float64) on the norms of the rows, of the rounded
    rows and of the rounding errors (x - bf16(x) is exact in float32: at most 16 significant bits)."""
    import torch

    rows = torch.as_tensor(rows, dtype=torch.float32)
    rounded = rows.bfloat16()
    error = rows - rounded.float()
    # a float32 norm is a sum of d squares, off by a relative d 2^-24 at most (7e-5 for 1,152
    # dimensions): raised by twice that, it never rounds below the true norm
    safety = 1 + 2 * rows.shape[1] * _FP32_UNIT
    return rounded, *(part.norm(dim=1).double() * safety for part in (rows, rounded.float(), error))


def bfloat16_error_bound(query, corpus, similarity, dim: int):
    """The bound on |q.c - s'| (see :class:`Bfloat16Search`) for computed similarities ``similarity``
    (float64, broadcast against them): ``query`` and ``corpus`` are ``(norm, rounded norm, error
    norm)`` of the query and corpus rows, per row or their maxima."""
    summation = dim * _FP32_UNIT / (1 - dim * _FP32_UNIT)  # a float32 sum of dim terms
    query_norm, query_rounded, query_error = query
    corpus_norm, corpus_rounded, corpus_error = corpus
    return (query_error * corpus_norm + query_rounded * corpus_error + summation * query_rounded * corpus_rounded
            + _SLACK + _BF16_UNIT / (1 - _BF16_UNIT) * similarity.abs())


class Bfloat16Search:
    """Exact inner-product search whose heavy product runs in bfloat16.

    Queries and corpus rows are rounded to bfloat16 (q~ = q - e_q) and multiplied by torch, which
    uses the CPU's matrix units where it has them (AMX, AVX-512 BF16) and converts to float32 where
    not: products of bfloat16 numbers are exact in float32, summed in float32 (error at most
    ``g |q~| |c~|``, g = d 2^-24 / (1 - d 2^-24)) and the sum A is returned rounded to bfloat16,
    s' = A (1 + t) with |t| <= u = 2^-8. Since ``q.c - q~.c~ = e_q.c + q~.e_c``,

        |q.c - s'| <= |e_q| |c| + |q~| |e_c| + g |q~| |c~| + u |s'| / (1 - u)

    with the rounding errors' norms measured, not assumed: about 0.005 + 0.004 |s'| for unit
    vectors of 1,152 dimensions. Per query and corpus block the norms are taken at their block
    maximum; the bound grows with s', so ranking by s' ranks by the bound too. Per query, the
    ``candidates`` rows with the highest upper bounds are kept, and the ``k``-th highest lower
    bound over the corpus is tracked; when the lowest kept upper bound is below it, no row outside
    the kept ones can be among the true top ``k``, and re-ranking them in float64 gives the exact
    answer (ties to the smaller corpus index). Otherwise (more than ``candidates`` rows within the
    bounds of the k-th best, as in a dense cluster) the query is answered by ``fallback``, exact
    float32 search; ``fallbacks`` counts them.
    """

    def __init__(self, corpus: EmbeddingSet, block_size: int = 16384, query_batch: int = 4096,
                 candidates: int = 32, fallback: Searcher | None = None):
        if block_size < 1 or query_batch < 1 or candidates < 1:
            raise ValueError(f"block_size, query_batch and candidates must be >= 1, got {block_size}, "
                             f"{query_batch}, {candidates}")
        self.corpus = corpus
        self.block_size, self.query_batch, self.candidates = block_size, query_batch, candidates
        self.fallback = fallback if fallback is not None else ExactSearch(corpus, use_gpu=False)
        self.fallbacks = 0

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import torch

        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = min(k, len(self.corpus))
        keep = max(self.candidates, k)
        batches = [slice(start, start + self.query_batch) for start in range(0, len(queries), self.query_batch)]
        rounded = [_rounded(queries[batch]) for batch in batches]
        kept_upper = torch.full((len(queries), 0), -np.inf, dtype=torch.float64)
        kept_index = torch.empty((len(queries), 0), dtype=torch.int64)
        top_lower = torch.full((len(queries), k), -np.inf, dtype=torch.float64)
        for offset, block in self.corpus.blocks(self.block_size):  # each corpus block rounded once
            corpus_rounded, *corpus_norms = _rounded(block)
            corpus_maxima = tuple(norm.max() for norm in corpus_norms)  # one bound per query and block
            found = []
            for query_rounded, *query_norms in rounded:
                values, positions = torch.topk(query_rounded @ corpus_rounded.T, min(keep, len(block)), dim=1)
                values = values.double()
                margin = bfloat16_error_bound(tuple(norm[:, None] for norm in query_norms), corpus_maxima, values,
                                              queries.shape[1])
                found.append((values, positions, margin))
            upper = torch.cat([values + margin for values, _, margin in found])
            lower = torch.cat([values[:, :k] - margin[:, :k] for values, _, margin in found])
            top_lower = torch.topk(torch.cat([top_lower, lower], dim=1), k, dim=1).values
            kept_upper = torch.cat([kept_upper, upper], dim=1)
            kept_index = torch.cat([kept_index, torch.cat([positions for _, positions, _ in found]) + offset], dim=1)
            if kept_upper.shape[1] > keep:
                kept_upper, order = torch.topk(kept_upper, keep, dim=1)
                kept_index = torch.gather(kept_index, 1, order)
        # proven: every row left out has an upper bound <= the lowest kept one, below the k-th lower bound
        proven = (kept_upper.shape[1] < keep) | (kept_upper[:, -1] < top_lower[:, -1]).numpy()
        sims, idxs = self._rerank(queries, kept_index.numpy(), k)
        unproven = np.flatnonzero(~proven)
        if len(unproven):
            self.fallbacks += len(unproven)
            log.info("bfloat16 search: %d of %d queries have more than %d candidates within the error bound; "
                     "searched exactly in float32", len(unproven), len(queries), keep)
            sims[unproven], idxs[unproven] = self.fallback.search(queries[unproven], k)
        return sims, idxs

    def _rerank(self, queries: np.ndarray, candidates: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The top ``k`` of each query's candidates by float64 similarity, ties to the smaller index."""
        flat = np.unique(candidates)
        rows = self.corpus.rows(flat).astype(np.float64)
        where = np.searchsorted(flat, candidates)
        similarity = np.empty(candidates.shape, dtype=np.float64)
        for start in range(0, len(queries), 256):  # (256, candidates, dim) float64 at a time
            part = slice(start, start + 256)
            similarity[part] = np.einsum("qd,qcd->qc", queries[part].astype(np.float64), rows[where[part]])
        order = np.lexsort((candidates, -similarity), axis=1)[:, :k]
        return (np.take_along_axis(similarity, order, axis=1).astype(np.float32),
                np.take_along_axis(candidates, order, axis=1))


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


def bfloat16_units() -> bool:
    """Whether torch multiplies bfloat16 on this CPU's bfloat16 units: the CPU has AVX-512 BF16 or
    AMX, and ATen dispatches its AVX-512 kernels (``ATEN_CPU_CAPABILITY`` can lower that). Without
    them a bfloat16 product is converted element by element: at PMC-OA scale (297k x 1152, 10,000
    queries) it was 4.9 times slower than float32 search under AVX2 kernels (docs/images.md)."""
    import torch

    fast = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    return fast and torch.backends.cpu.get_cpu_capability().startswith("AVX512")


def build_searcher(corpus: EmbeddingSet, index_cfg, seed: int) -> Searcher:
    """The searcher an ``index`` config asks for (exact, bf16, ivf or hnsw). ``bf16`` searches
    exactly in float32 instead, saying so, on a CPU without bfloat16 units: its answers are the
    same, and there the float32 search is the faster one."""
    from medexp.config.schemas import IndexKind

    kind = IndexKind(index_cfg.kind)
    if kind is IndexKind.bf16 and not bfloat16_units():
        log.warning("index.kind=bf16: this CPU has no bfloat16 units (avx512_bf16 or amx_bf16 with AVX-512 kernels), "
                    "where bfloat16 products are several times slower than float32; searching exactly in float32 "
                    "(the same answers)")
        kind = IndexKind.exact
    if kind is IndexKind.exact:
        return ExactSearch(corpus, index_cfg.block_size, index_cfg.gpu)
    if kind is IndexKind.bf16:  # its own block sizes (a bfloat16 product per block); block_size is the fallback's
        return Bfloat16Search(corpus, fallback=ExactSearch(corpus, index_cfg.block_size, index_cfg.gpu))
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
