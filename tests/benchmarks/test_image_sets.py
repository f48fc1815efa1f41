"""Image-only negative-control sets and the streaming sub-sampler (wikiart / tiny-imagenet style)."""

from __future__ import annotations

import datasets
import numpy as np
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from medexp.benchmarks import load_benchmark_from_config
from medexp.benchmarks.image_sets import subsample_indices, subsample_pool_size
from medexp.config.schemas import BenchConfig
from tests.benchmarks.upstream import ROW_GROUP, image_bytes, image_cells, write_hf_parquet

STYLES = ["Impressionism", "Cubism", "Baroque"]
GENRES = ["portrait", "landscape"]
SHARD_ROWS = 40  # two real shards of 40 rows, then a garbage third shard


def write_wikiart(root, shards=2, rows=SHARD_ROWS):
    for shard in range(shards):
        indices = list(range(shard * rows, (shard + 1) * rows))
        write_hf_parquet(
            root / "data" / f"train-{shard:05d}-of-{shards + 1:05d}.parquet",
            {"image": image_cells(indices), "artist": [i % 5 for i in indices],
             "genre": [i % 2 for i in indices], "style": [i % 3 for i in indices]},
            features={"artist": datasets.ClassLabel(names=[f"artist{k}" for k in range(5)]),
                      "genre": datasets.ClassLabel(names=GENRES),
                      "style": datasets.ClassLabel(names=STYLES)},
        )
    # a shard a sub-sample must never touch: opening it would fail
    (root / "data" / f"train-{shards:05d}-of-{shards + 1:05d}.parquet").write_bytes(b"not a parquet file")
    return root


def cfg(root, **fields):
    base = {"name": "wikiart", "format": "image_set", "split": "train", "label_column": "style", "root": str(root) if root else None,
            "max_skipped_share": 0.5}  # the fixtures plant corrupt images among a few rows
    return OmegaConf.merge(OmegaConf.structured(BenchConfig), {**base, **fields})


@pytest.mark.parametrize("n,pool", [(2000, 8000), (100, 400), (17, 68), (16, 66), (3, 53), (1, 51)])
def test_pool_size_is_max_of_4n_and_n_plus_50(n, pool):
    assert subsample_pool_size(n) == pool


def test_indices_are_sorted_uniform_draws_from_default_rng():
    expected = sorted(int(i) for i in np.random.default_rng(0).choice(53, size=3, replace=False))
    assert subsample_indices(53, 3, seed=0) == expected
    assert len(set(expected)) == 3 and all(0 <= i < 53 for i in expected)
    assert subsample_indices(53, 3, seed=1) != expected  # the seed matters
    assert subsample_indices(10, 10, seed=0) == list(range(10))
    with pytest.raises(ValueError, match="cannot sub-sample 11 rows from a split of 10"):
        subsample_indices(10, 11, seed=0)


def test_indices_are_uniform_over_the_pool():
    # over many seeds every pool position is picked about n/pool of the time
    hits = np.zeros(60)
    for seed in range(2000):
        hits[subsample_indices(60, 10, seed)] += 1
    rate = hits / 2000
    assert abs(rate.mean() - 10 / 60) < 1e-12
    assert np.all(np.abs(rate - 10 / 60) < 0.04)


def test_subsample_reads_only_the_pool(tmp_path, monkeypatch):
    root = write_wikiart(tmp_path / "wikiart")
    groups_read = []
    original = pq.ParquetFile.read_row_group

    def spy(self, group, *args, **kwargs):
        groups_read.append(group)
        return original(self, group, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy)
    n = 3
    pool = subsample_pool_size(n)  # 53: all of shard 0 and 13 rows of shard 1; shard 2 is garbage
    bench = load_benchmark_from_config(cfg(root, subsample_n=n), tmp_path / "cache")
    expected = sorted(int(i) for i in np.random.default_rng(0).choice(pool, size=n, replace=False))
    assert [ex.example_id for ex in bench.examples] == [f"wikiart::train::{i}" for i in expected]
    # only the row groups holding a pick are read (numbered within their shard), in order
    groups_with_picks = sorted({i // ROW_GROUP for i in expected})
    assert groups_read == [group % (SHARD_ROWS // ROW_GROUP) for group in groups_with_picks]
    assert max(groups_with_picks) * ROW_GROUP < pool


def test_examples_are_image_only_with_decoded_labels(tmp_path):
    root = write_wikiart(tmp_path / "wikiart")
    bench = load_benchmark_from_config(cfg(root, subsample_n=10), tmp_path / "cache")
    assert len(bench) == 10
    for example in bench.examples:
        row = int(example.example_id.rsplit("::", 1)[1])
        assert example.question == "" and example.options is None
        assert example.answer == STYLES[row % 3]
        assert example.meta == {"upstream_id": row, "artist": f"artist{row % 5}", "genre": GENRES[row % 2],
                                "style": STYLES[row % 3]}
        assert example.image.read_bytes() == image_bytes(row)
    rows = [int(ex.example_id.rsplit("::", 1)[1]) for ex in bench.examples]
    assert rows == sorted(rows) and max(rows) < subsample_pool_size(10)  # streamed order, inside the pool


def test_subsample_is_deterministic(tmp_path):
    root = write_wikiart(tmp_path / "wikiart")
    first = load_benchmark_from_config(cfg(root, subsample_n=7), tmp_path / "c1")
    second = load_benchmark_from_config(cfg(root, subsample_n=7), tmp_path / "c2")
    assert [ex.example_id for ex in first.examples] == [ex.example_id for ex in second.examples]
    other_seed = load_benchmark_from_config(cfg(root, subsample_n=7, subsample_seed=5), tmp_path / "c1")
    assert [ex.example_id for ex in other_seed.examples] != [ex.example_id for ex in first.examples]


def test_small_split_pool_is_the_whole_split(tmp_path):
    root = tmp_path / "tiny"
    write_hf_parquet(root / "data" / "valid-00000-of-00001.parquet",
                     {"image": image_cells(list(range(20))), "label": [i % 4 for i in range(20)]},
                     features={"label": datasets.ClassLabel(names=["n01443537", "n01629819", "n01641577", "n01644900"])})
    bench = load_benchmark_from_config(
        cfg(root, name="tinyimagenet", split="valid", label_column="label", subsample_n=8), tmp_path / "cache")
    expected = sorted(int(i) for i in np.random.default_rng(0).choice(20, size=8, replace=False))
    assert [ex.example_id for ex in bench.examples] == [f"tinyimagenet::valid::{i}" for i in expected]
    assert bench.examples[0].answer == ["n01443537", "n01629819", "n01641577", "n01644900"][expected[0] % 4]
    with pytest.raises(ValueError, match="cannot sub-sample 21 rows from a split of 20"):
        load_benchmark_from_config(cfg(root, split="valid", label_column="label", subsample_n=21), tmp_path / "cache")


def test_without_subsample_all_rows_in_order_and_no_label(tmp_path):
    root = write_wikiart(tmp_path / "wikiart", shards=1, rows=6)
    (root / "data" / "train-00001-of-00002.parquet").unlink()
    bench = load_benchmark_from_config(cfg(root, label_column=None), tmp_path / "cache")
    assert [ex.example_id for ex in bench.examples] == [f"wikiart::train::{i}" for i in range(6)]
    assert all(ex.answer == "" for ex in bench.examples)


class FakeHubFileSystem:
    """Stands in for huggingface_hub.HfFileSystem over a local copy of a dataset repo."""

    opened: list[str] = []

    def __init__(self, repo_dir, prefix):
        self.repo_dir, self.prefix = repo_dir, prefix

    def glob(self, pattern):
        assert pattern == f"{self.prefix}/**/*.parquet"
        return [f"{self.prefix}/{path.relative_to(self.repo_dir).as_posix()}" for path in self.repo_dir.rglob("*.parquet")]

    def open(self, path, mode):
        assert mode == "rb" and path.startswith(self.prefix + "/")
        FakeHubFileSystem.opened.append(path[len(self.prefix) + 1 :])
        return (self.repo_dir / path[len(self.prefix) + 1 :]).open("rb")


def test_hub_streaming_matches_the_local_copy(tmp_path, monkeypatch):
    import huggingface_hub

    root = write_wikiart(tmp_path / "wikiart")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "HfFileSystem",
                        lambda: FakeHubFileSystem(root, "datasets/huggan/wikiart@refs%2Fconvert%2Fparquet"))
    FakeHubFileSystem.opened = []
    hub_cfg = cfg(None, hub_id="huggan/wikiart", revision="refs/convert/parquet", subsample_n=3)
    streamed = load_benchmark_from_config(hub_cfg, tmp_path / "cache")
    local = load_benchmark_from_config(cfg(root, subsample_n=3), tmp_path / "cache")
    assert streamed.examples == local.examples
    assert FakeHubFileSystem.opened == ["data/train-00000-of-00003.parquet", "data/train-00001-of-00003.parquet"]
