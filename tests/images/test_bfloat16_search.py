"""Bfloat16Search: bfloat16 products find the candidates, float64 re-ranks them, and every answer
equals exact search's, including neighbours closer together than bfloat16 rounding can tell apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from medexp.images.search import Bfloat16Search, ExactSearch, _rounded, bfloat16_error_bound, nearest
from medexp.images.store import EmbeddingSet


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _brute_force(corpus: EmbeddingSet, queries: np.ndarray, k: int) -> np.ndarray:
    """Top-k corpus indices by float64 similarity over the stored (float16, re-normalised) rows,
    ties to the smaller index: the answer exact search gives, computed by hand."""
    rows = corpus.rows(np.arange(len(corpus))).astype(np.float64)
    similarity = queries.astype(np.float64) @ rows.T
    order = np.lexsort((np.broadcast_to(np.arange(len(corpus)), similarity.shape), -similarity), axis=1)
    return order[:, :k]


def _corpus(seed: int, n: int, dim: int) -> tuple[EmbeddingSet, np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = _unit(rng.standard_normal((n, dim)))
    return EmbeddingSet.from_array([f"c{i}" for i in range(n)], vectors), rng


@pytest.mark.parametrize(("block_size", "query_batch", "k"), [(128, 50, 1), (500, 1000, 2), (97, 33, 3)])
def test_answers_equal_brute_force_with_planted_near_copies(block_size, query_batch, k):
    corpus, rng = _corpus(0, 1500, 384)
    sources = rng.integers(0, len(corpus), 40)
    near_copies = _unit(corpus.rows(sources) + 0.02 * rng.standard_normal((40, 384)))
    queries = np.concatenate([near_copies, _unit(rng.standard_normal((60, 384)))]).astype(np.float32)
    searcher = Bfloat16Search(corpus, block_size=block_size, query_batch=query_batch)
    _, idxs = searcher.search(queries, k)
    assert idxs.tolist() == _brute_force(corpus, queries, k).tolist()
    assert idxs[:40, 0].tolist() == sources.tolist()
    assert searcher.fallbacks == 0  # the bound is tight enough for random data


def test_neighbours_closer_than_bfloat16_rounding_are_told_apart_by_the_rerank():
    """Pairs of corpus rows whose similarities to the query differ by less than the bfloat16 error
    bound: the bfloat16 products cannot order them, the float64 re-rank must."""
    corpus_rows, rng = _corpus(1, 400, 256)
    rows = corpus_rows.rows(np.arange(400)).astype(np.float64)
    twins = _unit(rows[:50] + 3e-3 * rng.standard_normal((50, 256)))  # about 1e-3 of cosine apart
    corpus = EmbeddingSet.from_array([f"c{i}" for i in range(450)], np.concatenate([rows, twins]))
    queries = _unit(rows[:50] + 1e-3 * rng.standard_normal((50, 256))).astype(np.float32)
    stored = corpus.rows(np.arange(450)).astype(np.float64)
    margin = np.abs(queries @ stored[:50].T - queries @ stored[400:].T).diagonal()
    assert (margin < 0.005).mean() > 0.5  # most pairs closer than the bound (0.005 and up): the case this test is about
    _, idxs = Bfloat16Search(corpus, block_size=128).search(queries, 2)
    assert idxs.tolist() == _brute_force(corpus, queries, 2).tolist()


def test_identical_rows_tie_to_the_smaller_index_and_self_exclusion_works():
    corpus_rows, _ = _corpus(2, 300, 128)
    rows = corpus_rows.rows(np.arange(300))
    corpus = EmbeddingSet.from_array([f"c{i}" for i in range(301)], np.concatenate([rows, rows[7:8]]))
    searcher = Bfloat16Search(corpus, block_size=50)
    assert searcher.search(rows[7:8], 2)[1].tolist() == [[7, 300]]
    distance, index = nearest(searcher, corpus.rows(np.array([7, 300, 3])), exclude=np.array([7, 300, 3]))
    exact_distance, exact_index = nearest(ExactSearch(corpus, use_gpu=False), corpus.rows(np.array([7, 300, 3])),
                                          exclude=np.array([7, 300, 3]))
    assert index.tolist() == exact_index.tolist() and index[:2].tolist() == [300, 7]
    assert distance.tolist() == exact_distance.tolist() and distance[0] == distance[1] == 0.0


def test_a_dense_cluster_falls_back_to_exact_search_and_stays_exact():
    """More rows within the error bound of the best than candidates kept: the bound cannot prove
    the answer, so the query is searched exactly (and counted)."""
    rng = np.random.default_rng(3)
    centre = _unit(rng.standard_normal((1, 64)))
    cluster = _unit(centre + 1e-4 * rng.standard_normal((200, 64)))
    corpus = EmbeddingSet.from_array([f"c{i}" for i in range(200)], cluster)
    searcher = Bfloat16Search(corpus, block_size=64, candidates=4)
    queries = centre.astype(np.float32)
    _, idxs = searcher.search(queries, 1)
    assert searcher.fallbacks == 1
    assert idxs.tolist() == ExactSearch(corpus, use_gpu=False).search(queries, 1)[1].tolist()


def test_the_error_bound_holds_for_every_pair():
    """|q.c - s'| <= the bound for torch's bfloat16 product, per pair, on random vectors and on
    adversarially flat ones (every term the same size, so rounding errors add up)."""
    import torch

    rng = np.random.default_rng(4)
    flat = np.sign(rng.standard_normal((20, 1152))) + 1e-3 * rng.standard_normal((20, 1152))
    rows = torch.as_tensor(_unit(np.concatenate([rng.standard_normal((200, 1152)), flat, -flat])).astype(np.float32))
    query_rounded, *query_norms = _rounded(rows[:80])
    corpus_rounded, *corpus_norms = _rounded(rows)
    computed = (query_rounded @ corpus_rounded.T).double()
    bound = bfloat16_error_bound(tuple(n[:, None] for n in query_norms), tuple(n[None, :] for n in corpus_norms),
                                 computed, 1152)
    error = (rows[:80].double() @ rows.double().T - computed).abs()
    assert (error <= bound).all()
    # measured norms, not worst cases: about 0.0034 + 0.004 |s'| for these unit vectors (the worst case
    # would be 0.0118), and the errors reach a tenth of it
    assert bound.max() < 0.008 and (error / bound).max() > 0.05


_OTHER_CPU = """
import json, sys
import numpy as np, torch
from medexp.images.search import Bfloat16Search
from medexp.images.store import EmbeddingSet
rng = np.random.default_rng(5)
rows = rng.standard_normal((800, 256)); rows /= np.linalg.norm(rows, axis=1, keepdims=True)
corpus = EmbeddingSet.from_array([f"c{i}" for i in range(800)], rows)
queries = (rows[:100] + 0.01 * rng.standard_normal((100, 256))).astype(np.float32)
sims, idxs = Bfloat16Search(corpus, block_size=200).search(queries, 2)
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "idxs": idxs.tolist(), "sims": sims.tolist()}))
"""


def test_answers_are_identical_under_another_cpus_kernels():
    """The int8 products are exact integers on any kernel; candidates and float64 re-ranks then give
    the same answers with ATen's and oneDNN's portable paths as with the host's."""
    results = []
    for extra in ({}, {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}):
        env = {**os.environ, **extra}
        output = subprocess.run([sys.executable, "-c", _OTHER_CPU], env=env, capture_output=True, text=True, check=True)
        results.append(json.loads(output.stdout.strip().splitlines()[-1]))
    assert results[1]["capability"] == "DEFAULT"
    assert results[0]["idxs"] == results[1]["idxs"] and results[0]["sims"] == results[1]["sims"]


_SEARCHER_KIND = """
import numpy as np
from omegaconf import OmegaConf
from medexp.config.schemas import IndexConfig
from medexp.images.search import bfloat16_units, build_searcher
from medexp.images.store import EmbeddingSet
corpus = EmbeddingSet.from_array(["a", "b"], np.eye(2, 8))
index = OmegaConf.structured(IndexConfig(kind="bf16", gpu=False))
print(bfloat16_units(), type(build_searcher(corpus, index, 0)).__name__)
"""


@pytest.mark.parametrize("capability", ["avx2", None])
def test_bf16_searches_in_float32_where_the_cpu_has_no_bfloat16_units(capability):
    """Under ATen's AVX2 kernels (a real process with ATEN_CPU_CAPABILITY=avx2) bfloat16 products
    are emulated, 4.9 times slower than float32 at PMC-OA scale: index.kind=bf16 searches exactly
    in float32 (the same answers). With the host's kernels it uses the bfloat16 search only where
    the CPU reports avx512_bf16 or amx_bf16."""
    import torch

    env = {key: value for key, value in os.environ.items() if key != "ATEN_CPU_CAPABILITY"}
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    result = subprocess.run([sys.executable, "-c", _SEARCHER_KIND], env=env, capture_output=True, text=True, check=True)
    units, searcher = result.stdout.split()
    if capability == "avx2":
        assert (units, searcher) == ("False", "ExactSearch")
    else:
        host = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
        assert units == str(host and torch.backends.cpu.get_cpu_capability().startswith("AVX512"))
        assert searcher == ("Bfloat16Search" if units == "True" else "ExactSearch")
