"""Nearest-neighbour search on hand-made vectors, self-exclusion, approximate recall, the float16 store."""

from __future__ import annotations

import numpy as np
import pytest

from medexp.images.embedders import PerceptualHash
from medexp.images.search import ApproximateSearch, ExactSearch, cosine_distances, nearest, recall_at_1
from medexp.images.store import EmbeddingSet, distinct_images, embed_images


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
    assert distance[1] == distance[2] == 0.0  # identical vectors: exactly 0, no float residue
    unexcluded, own = nearest(searcher, corpus.rows(rows), exclude=np.array([-1, -1, -1, -1]))
    assert own.tolist() == [0, 3, 3, 1] and np.all(unexcluded == 0.0)


@pytest.mark.parametrize("dim", [2, 768, 1152])
def test_identical_vectors_are_at_distance_exactly_zero_and_distinct_ones_above_it(dim):
    """Float32 inner products leave 1 - <q, q> at about +-5e-7 for float16 vectors; the
    recomputed float64 distance is 0 for identical vectors and positive for any other."""
    rng = np.random.default_rng(dim)
    vectors = rng.normal(size=(200, dim))
    corpus = EmbeddingSet.from_array([str(i) for i in range(200)], vectors)
    searcher = ExactSearch(corpus, block_size=64, use_gpu=False)
    sims, _ = searcher.search(corpus.rows(range(200)), 1)
    assert np.any(1.0 - sims[:, 0].astype(np.float64) != 0.0)  # the residue this replaces
    distance, index = nearest(searcher, corpus.rows(range(200)))
    assert index.tolist() == list(range(200)) and np.all(distance == 0.0)
    # one float16 step in one component is another vector: positive, tiny, and resolved
    nudged = corpus.shards[0].copy()
    nudged[:, 0] = np.nextafter(nudged[:, 0], np.float16(np.inf))
    other = EmbeddingSet([str(i) for i in range(200)], [nudged])
    apart = cosine_distances(corpus.rows(range(200)), other.rows(range(200)))
    assert np.all(apart > 0.0) and np.all(apart < 1e-6)
    np.testing.assert_allclose(cosine_distances(unit([0.0, 0.0]), unit([90.0, 180.0])), [1.0, 2.0], atol=1e-12)


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


def embed(embedder, paths, cache, batch_size=3, shard_size=4):
    return embed_images(embedder, distinct_images(paths, cache), cache, batch_size, shard_size)


def entries(cache):
    """The embedding entries (directories; each has a lock file beside it)."""
    return [path for path in (cache / "embeddings").iterdir() if path.is_dir()]


def test_store_writes_float16_shards_and_reuses_them(tmp_path, scan_files):
    embedder = CountingHash()
    first = embed(embedder, scan_files, tmp_path / "cache")
    assert embedder.calls == 10 and len(first.shards) == 3 and first.shards[0].dtype == np.float16
    np.testing.assert_allclose(first.rows(range(10)), PerceptualHash(8, 4).embed(scan_files), atol=1e-3)
    again = embed(embedder, scan_files, tmp_path / "cache")
    assert embedder.calls == 10  # nothing recomputed
    np.testing.assert_array_equal(again.rows(range(10)), first.rows(range(10)))


def test_each_distinct_image_is_embedded_once_and_mapped_back_to_every_file(tmp_path, scan_files):
    # a VQA split: each image once per question, here 3 copies (other names, same bytes) of each
    copies = []
    for k, path in enumerate(scan_files):
        for c in range(3):
            copy = tmp_path / "questions" / f"q{k}_{c}.png"
            copy.parent.mkdir(exist_ok=True)
            copy.write_bytes(path.read_bytes())
            copies.append(copy)
    images = distinct_images(copies, tmp_path / "cache")
    assert len(images) == 10 and images.inverse.tolist() == [k for k in range(10) for _ in range(3)]
    assert images.paths == copies[::3]  # the first file of each content
    embedder = CountingHash()
    vectors = embed_images(embedder, images, tmp_path / "cache", 3, 4)
    assert embedder.calls == 10 and vectors.ids == images.digests
    np.testing.assert_array_equal(vectors.rows(images.inverse)[::3], vectors.rows(range(10)))
    # the entry is keyed by content: the originals (other paths, same bytes) reuse it
    embed(embedder, scan_files, tmp_path / "cache")
    assert embedder.calls == 10


def test_store_resumes_at_the_missing_shard(tmp_path, scan_files):
    embedder = CountingHash()
    embed(embedder, scan_files, tmp_path / "cache")
    (entry,) = entries(tmp_path / "cache")
    (entry / "complete.json").unlink()  # as if interrupted after the first two shards
    (entry / "shard-000000008-000000010.npy").unlink()
    embed(embedder, scan_files, tmp_path / "cache")
    assert embedder.calls == 12  # only the two images of the missing shard


def test_failed_embedding_leaves_no_complete_entry(tmp_path, scan_files):
    scan_files[6].write_bytes(b"not an image")
    with pytest.raises(ValueError, match="cannot read image .*scan_6.png"):
        embed(PerceptualHash(8, 4), scan_files, tmp_path / "cache")
    (entry,) = entries(tmp_path / "cache")
    assert not (entry / "complete.json").exists()
    assert sorted(p.name for p in entry.glob("shard-*.npy")) == ["shard-000000000-000000004.npy"]


def test_changed_image_or_embedder_gets_a_new_entry(tmp_path, scan_files):
    embed(PerceptualHash(8, 4), scan_files, tmp_path / "cache")
    embed(PerceptualHash(16, 4), scan_files, tmp_path / "cache")
    scan_files[0].write_bytes(scan_files[1].read_bytes() + b"\0")
    embed(PerceptualHash(8, 4), scan_files, tmp_path / "cache")
    assert len(entries(tmp_path / "cache")) == 3


def test_store_rejects_empty_input(tmp_path):
    with pytest.raises(ValueError, match="no images"):
        embed(PerceptualHash(8, 4), [], tmp_path)


def test_subset_copies_no_shard_and_reads_the_memory_maps(tmp_path):
    from medexp.images.store import KeptRows

    vectors = np.random.default_rng(1).normal(size=(7, 4))
    whole = EmbeddingSet.from_array([str(i) for i in range(7)], vectors)
    for name, rows in (("a", slice(0, 3)), ("b", slice(3, 5)), ("c", slice(5, 7))):
        np.save(tmp_path / f"{name}.npy", whole.shards[0][rows])
    mapped = [np.load(tmp_path / f"{name}.npy", mmap_mode="r") for name in "abc"]
    split = EmbeddingSet([str(i) for i in range(7)], mapped)
    part = split.subset([0, 2, 3, 4, 6])
    assert part.ids == ["0", "2", "3", "4", "6"] and [len(shard) for shard in part.shards] == [2, 2, 1]
    assert part.shards[1] is mapped[1]  # a wholly kept shard stays as it is
    assert [type(shard) for shard in (part.shards[0], part.shards[2])] == [KeptRows, KeptRows]
    assert part.shards[0].stored is mapped[0] and part.shards[2].stored is mapped[2]  # still the memory maps
    np.testing.assert_array_equal(part.rows(range(5)), whole.rows([0, 2, 3, 4, 6]))
    np.testing.assert_array_equal(np.concatenate([block for _, block in part.blocks(1)]), whole.rows([0, 2, 3, 4, 6]))
    again = part.subset([1, 2, 4])  # kept rows of kept rows: fewer rows of the same map
    assert again.ids == ["2", "3", "6"] and again.shards[0].stored is mapped[0] and again.shards[0].kept.tolist() == [2]
    np.testing.assert_array_equal(again.stored(range(3)), whole.stored([2, 3, 6]))
    with pytest.raises(ValueError, match="sorted and distinct"):
        split.subset([2, 1])


def test_vector_keys_match_identical_vectors_only():
    from medexp.images.store import vector_keys

    rows = np.array([[1.0, 0.0, 0.0], [1.0, -0.0, 0.0], [1.0, 1e-3, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    keys = vector_keys(EmbeddingSet([str(i) for i in range(5)], [rows.astype(np.float16)]))
    assert keys[0] == keys[1] == keys[4]  # -0.0 is the same vector as 0.0
    assert len({keys[0], keys[2], keys[3]}) == 3  # one float16 step apart is another vector
