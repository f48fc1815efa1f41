"""Nearest-neighbour search on hand-made vectors, self-exclusion, approximate recall, the float16 store."""

from __future__ import annotations

import numpy as np
import pytest

from medexp.images.embedders import PerceptualHash
from medexp.images.search import ApproximateSearch, ExactSearch, nearest, recall_at_1
from medexp.images.store import EmbeddingSet, embed_images


def unit(degrees) -> np.ndarray:
    radians = np.radians(np.asarray(degrees, dtype=np.float64))
    return np.stack([np.cos(radians), np.sin(radians)], axis=1)


# corpus directions in degrees; fp16 keeps cosines to ~1e-3, enough for these gaps
CORPUS_DEGREES = [0.0, 90.0, 180.0, 45.0, 270.0, 45.0]


@pytest.fixture()
def corpus() -> EmbeddingSet:
    return EmbeddingSet.from_array([f"c{i}" for i in range(len(CORPUS_DEGREES))], unit(CORPUS_DEGREES))


@pytest.mark.parametrize("block_size", [1, 2, 4, 100])
def test_exact_search_matches_hand_computed_cosines(corpus, block_size):
    queries = unit([10.0, 100.0, 200.0])
    sims, idxs = ExactSearch(corpus, block_size=block_size, use_gpu=False).search(queries, k=2)
    assert idxs.tolist() == [[0, 3], [1, 3], [2, 4]]  # 10 deg: 0 (10 away) then 45 (35 away)
    expected = np.cos(np.radians([[10.0, 35.0], [10.0, 55.0], [20.0, 70.0]]))
    np.testing.assert_allclose(sims, expected, atol=2e-3)
    distance, index = nearest(ExactSearch(corpus, block_size=block_size, use_gpu=False), queries)
    np.testing.assert_allclose(distance, 1.0 - np.cos(np.radians([10.0, 10.0, 20.0])), atol=2e-3)
    assert index.tolist() == [0, 1, 2]


def test_ties_go_to_the_smaller_corpus_index(corpus):
    _, idxs = ExactSearch(corpus, block_size=1, use_gpu=False).search(unit([45.0]), k=2)
    assert idxs.tolist() == [[3, 5]]  # two identical 45-degree vectors


def test_self_exclusion_keeps_a_duplicate_but_never_the_row_itself(corpus):
    searcher = ExactSearch(corpus, use_gpu=False)
    rows = np.array([0, 3, 5, 1])
    distance, index = nearest(searcher, corpus.rows(rows), exclude=rows)
    assert index.tolist() == [3, 5, 3, 3]  # 0 -> 45 deg; each 45-degree copy finds the other at distance 0
    np.testing.assert_allclose(distance, [1 - np.cos(np.radians(45.0)), 0.0, 0.0, 1 - np.cos(np.radians(45.0))], atol=2e-3)
    unexcluded, own = nearest(searcher, corpus.rows(rows), exclude=np.array([-1, -1, -1, -1]))
    assert own.tolist() == [0, 3, 3, 1] and np.all(unexcluded < 1e-3)


def test_embedding_set_rows_and_blocks_cross_shard_boundaries():
    vectors = np.random.default_rng(0).normal(size=(7, 5))
    whole = EmbeddingSet.from_array([str(i) for i in range(7)], vectors)
    split = EmbeddingSet([str(i) for i in range(7)], [whole.shards[0][:3], whole.shards[0][3:]])
    np.testing.assert_array_equal(split.rows([6, 0, 3, 2]), whole.rows([6, 0, 3, 2]))
    offsets = [offset for offset, _ in split.blocks(2)]
    assert offsets == [0, 2, 3, 5]
    stacked = np.concatenate([block for _, block in split.blocks(2)])
    np.testing.assert_allclose(np.linalg.norm(stacked, axis=1), 1.0, atol=1e-6)
    with pytest.raises(ValueError, match="7 vectors for 6 ids"):
        EmbeddingSet([str(i) for i in range(6)], whole.shards)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_indexes_are_deterministic_and_measured(kind):
    rng = np.random.default_rng(5)
    corpus = EmbeddingSet.from_array([str(i) for i in range(3000)], rng.normal(size=(3000, 16)))
    queries = rng.normal(size=(300, 16))
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    exact = ExactSearch(corpus, use_gpu=False)
    settings = {"nlist": 64, "nprobe": 1, "hnsw_m": 4, "ef_search": 4, "use_gpu": False}
    seed = 2**32 - 5  # cell seeds are unsigned 32-bit
    first = ApproximateSearch(corpus, kind, seed=seed, **settings)
    second = ApproximateSearch(corpus, kind, seed=seed, **settings)
    np.testing.assert_array_equal(first.search(queries, 1)[1], second.search(queries, 1)[1])
    recall = recall_at_1(first, exact, queries)
    # the same number by hand: share of queries whose approximate top-1 is as similar as the exact one
    approx_sim = first.search(queries, 1)[0][:, 0]
    exact_sim = exact.search(queries, 1)[0][:, 0]
    assert recall == pytest.approx(np.mean(approx_sim >= exact_sim - 1e-5))
    assert 0.2 < recall < 1.0  # deliberately starved settings miss some neighbours
    generous = ApproximateSearch(corpus, kind, seed=7, nlist=64, nprobe=64, hnsw_m=32, ef_search=512, use_gpu=False)
    assert recall_at_1(generous, exact, queries) >= 0.99


def test_ivf_rejects_more_cells_than_vectors():
    corpus = EmbeddingSet.from_array(["a", "b", "c"], np.eye(3))
    with pytest.raises(ValueError, match="nlist"):
        ApproximateSearch(corpus, "ivf", seed=0, nlist=10, use_gpu=False)


# --- the float16 embedding store ---------------------------------------------------------------


class CountingHash(PerceptualHash):
    """The real perceptual hash, counting how many images it embeds."""

    def __init__(self):
        super().__init__(hash_size=8, highfreq_factor=4)
        self.calls = 0

    def embed(self, paths):
        self.calls += len(paths)
        return super().embed(paths)


@pytest.fixture()
def scan_files(tmp_path):
    from medexp.demo.scans import ScanSpec, png_bytes, render_scan

    paths = []
    for k in range(10):
        path = tmp_path / "images" / f"scan_{k}.png"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(png_bytes(render_scan(ScanSpec("CT", "liver", seed=k), 64)))
        paths.append(path)
    return paths


def test_store_writes_float16_shards_and_reuses_them(tmp_path, scan_files):
    embedder = CountingHash()
    ids = [f"x{k}" for k in range(10)]
    first = embed_images(embedder, ids, scan_files, tmp_path / "cache", batch_size=3, shard_size=4)
    assert embedder.calls == 10 and len(first.shards) == 3 and first.shards[0].dtype == np.float16
    np.testing.assert_allclose(first.rows(range(10)), PerceptualHash(8, 4).embed(scan_files), atol=1e-3)
    again = embed_images(embedder, ids, scan_files, tmp_path / "cache", batch_size=3, shard_size=4)
    assert embedder.calls == 10  # nothing recomputed
    np.testing.assert_array_equal(again.rows(range(10)), first.rows(range(10)))


def test_store_resumes_at_the_missing_shard(tmp_path, scan_files):
    embedder = CountingHash()
    ids = [f"x{k}" for k in range(10)]
    embed_images(embedder, ids, scan_files, tmp_path / "cache", batch_size=3, shard_size=4)
    entry = next((tmp_path / "cache" / "embeddings").iterdir())
    (entry / "complete.json").unlink()  # as if interrupted after the first two shards
    (entry / "shard-000000008-000000010.npy").unlink()
    embed_images(embedder, ids, scan_files, tmp_path / "cache", batch_size=3, shard_size=4)
    assert embedder.calls == 12  # only the two images of the missing shard


def test_failed_embedding_leaves_no_complete_entry(tmp_path, scan_files):
    scan_files[6].write_bytes(b"not an image")
    with pytest.raises(ValueError, match="cannot read image .*scan_6.png"):
        embed_images(PerceptualHash(8, 4), [str(k) for k in range(10)], scan_files, tmp_path / "cache", 3, 4)
    entry = next((tmp_path / "cache" / "embeddings").iterdir())
    assert not (entry / "complete.json").exists()
    assert sorted(p.name for p in entry.glob("shard-*")) == ["shard-000000000-000000004.npy"]


def test_changed_image_or_embedder_gets_a_new_entry(tmp_path, scan_files):
    ids = [str(k) for k in range(10)]
    embed_images(PerceptualHash(8, 4), ids, scan_files, tmp_path / "cache", 3, 4)
    embed_images(PerceptualHash(16, 4), ids, scan_files, tmp_path / "cache", 3, 4)
    scan_files[0].write_bytes(scan_files[1].read_bytes() + b"\0")
    embed_images(PerceptualHash(8, 4), ids, scan_files, tmp_path / "cache", 3, 4)
    assert len(list((tmp_path / "cache" / "embeddings").iterdir())) == 3


def test_store_rejects_empty_or_mismatched_input(tmp_path, scan_files):
    with pytest.raises(ValueError, match="no images"):
        embed_images(PerceptualHash(8, 4), [], [], tmp_path, 3, 4)
    with pytest.raises(ValueError, match="2 ids for 10 images"):
        embed_images(PerceptualHash(8, 4), ["a", "b"], scan_files, tmp_path, 3, 4)
