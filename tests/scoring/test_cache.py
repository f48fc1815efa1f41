"""ScoreCache (resumable sharded parquet tables) and shard_orders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from medexp.scoring import shard_orders
from medexp.scoring.cache import ScoreCache

KEY = {"table": "unit", "version": 1, "model": "m"}
N_ITEMS, SHARD = 10, 3  # shards [0,3) [3,6) [6,9) [9,10)


class Compute:
    """A deterministic compute function that records its calls and can fail once on demand."""

    def __init__(self, fail_on_call: int | None = None):
        self.calls: list[tuple[int, int]] = []
        self.fail_on_call = fail_on_call

    def __call__(self, start: int, stop: int) -> pd.DataFrame:
        self.calls.append((start, stop))
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise RuntimeError("injected failure")
        items = np.arange(start, stop)
        return pd.DataFrame(
            {
                "item": items,
                "value": np.sin(items + 0.5) * 1e3,
                "name": [f"item-{i}" for i in items],
                "flag": items % 2 == 0,
            }
        )


def expected_table() -> pd.DataFrame:
    return Compute()(0, N_ITEMS)


def files(entry: Path) -> set[str]:
    return {p.name for p in entry.iterdir()}


def test_table_round_trips(tmp_path):
    cache = ScoreCache(tmp_path)
    compute = Compute()
    fresh = cache.get_or_compute(KEY, N_ITEMS, SHARD, compute)
    pd.testing.assert_frame_equal(fresh, expected_table())
    assert compute.calls == [(0, 3), (3, 6), (6, 9), (9, 10)]
    entry = cache.entry(KEY)
    assert {"complete.json", "table.parquet", "key.json"} <= files(entry)
    assert not [name for name in files(entry) if name.endswith(".tmp")]
    cached = ScoreCache(tmp_path).get_or_compute(KEY, N_ITEMS, SHARD, compute)
    pd.testing.assert_frame_equal(cached, expected_table())
    assert len(compute.calls) == 4  # nothing recomputed once complete


def test_complete_table_never_calls_compute(tmp_path):
    cache = ScoreCache(tmp_path)
    cache.get_or_compute(KEY, N_ITEMS, SHARD, Compute())

    def boom(start, stop):
        raise AssertionError("compute called on a complete table")

    table = cache.get_or_compute(KEY, N_ITEMS, SHARD, boom)
    assert len(table) == N_ITEMS


def test_keys_are_content_addressed(tmp_path):
    cache = ScoreCache(tmp_path)
    assert cache.entry({"a": 1, "b": 2}) == cache.entry({"b": 2, "a": 1})
    assert cache.entry(KEY) != cache.entry({**KEY, "model": "other"})
    cache.get_or_compute(KEY, N_ITEMS, SHARD, Compute())
    other = Compute()
    cache.get_or_compute({**KEY, "model": "other"}, N_ITEMS, SHARD, other)
    assert len(other.calls) == 4


def test_interrupted_run_resumes_only_missing_shards(tmp_path):
    cache = ScoreCache(tmp_path)
    failing = Compute(fail_on_call=2)
    with pytest.raises(RuntimeError, match="injected failure"):
        cache.get_or_compute(KEY, N_ITEMS, SHARD, failing)
    entry = cache.entry(KEY)
    assert not (entry / "complete.json").exists()
    assert not (entry / "table.parquet").exists()
    assert [n for n in files(entry) if n.startswith("shard-")] == ["shard-0000000-0000003.parquet"]
    assert not [name for name in files(entry) if name.endswith(".tmp")]

    resumed = Compute()
    table = cache.get_or_compute(KEY, N_ITEMS, SHARD, resumed)
    assert resumed.calls == [(3, 6), (6, 9), (9, 10)]
    pd.testing.assert_frame_equal(table, expected_table())
    assert (entry / "complete.json").is_file()
    uninterrupted = ScoreCache(tmp_path / "other").get_or_compute(KEY, N_ITEMS, SHARD, Compute())
    pd.testing.assert_frame_equal(table, uninterrupted)


def test_leftover_temp_file_is_never_read_as_a_shard(tmp_path):
    cache = ScoreCache(tmp_path)
    entry = cache.entry(KEY)
    entry.mkdir(parents=True)
    # What a crash in the middle of atomic_write_parquet leaves behind: garbage, or a valid
    # parquet with the wrong content, under the temp name.
    (entry / ".shard-0000000-0000003.parquet.abc123.tmp").write_bytes(b"not parquet at all")
    pd.DataFrame({"item": [99], "value": [0.0], "name": ["bad"], "flag": [True]}).to_parquet(
        entry / ".shard-0000003-0000006.parquet.def456.tmp", index=False
    )
    compute = Compute()
    table = cache.get_or_compute(KEY, N_ITEMS, SHARD, compute)
    assert compute.calls == [(0, 3), (3, 6), (6, 9), (9, 10)]
    pd.testing.assert_frame_equal(table, expected_table())
    pd.testing.assert_frame_equal(pd.read_parquet(entry / "table.parquet"), expected_table())


def test_missing_marker_means_incomplete_even_with_a_table(tmp_path):
    """A table.parquet without complete.json (crash between the two writes) is not trusted."""
    cache = ScoreCache(tmp_path)
    cache.get_or_compute(KEY, N_ITEMS, SHARD, Compute())
    entry = cache.entry(KEY)
    (entry / "complete.json").unlink()
    pd.DataFrame({"item": [-1]}).to_parquet(entry / "table.parquet")
    compute = Compute()
    table = cache.get_or_compute(KEY, N_ITEMS, SHARD, compute)
    assert compute.calls == []  # shards are all there
    pd.testing.assert_frame_equal(table, expected_table())
    pd.testing.assert_frame_equal(pd.read_parquet(entry / "table.parquet"), expected_table())


def test_list_cells_round_trip_with_equal_values_and_types(tmp_path):
    def compute(start, stop):
        return pd.DataFrame({"item": range(start, stop), "tokens": [[float(i), -1.5] for i in range(start, stop)]})

    cache = ScoreCache(tmp_path)
    fresh = cache.get_or_compute(KEY, 5, 2, compute)
    cached = cache.get_or_compute(KEY, 5, 2, compute)
    assert type(fresh["tokens"].iloc[0]) is type(cached["tokens"].iloc[0])
    for a, b in zip(fresh["tokens"], cached["tokens"]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ---------------------------------------------------------------------------- shard_orders


@pytest.mark.parametrize("n_examples,shards,permutations", [(10, 2, 3), (11, 3, 5), (7, 7, 2), (100, 6, 0)])
def test_shard_orders_shape(n_examples, shards, permutations):
    orders = shard_orders(n_examples, shards, permutations, seed=3)
    assert len(orders) == shards
    sizes = [len(shard[0]) for shard in orders]
    assert sum(sizes) == n_examples
    assert max(sizes) - min(sizes) <= 1
    for shard, size in zip(orders, sizes):
        assert len(shard) == permutations + 1
        np.testing.assert_array_equal(shard[0], np.arange(size))
        for order in shard:
            assert len(order) == size
            np.testing.assert_array_equal(np.sort(order), np.arange(size))


def test_shard_orders_are_reproducible_and_seed_dependent():
    a = shard_orders(40, 4, 6, seed=11)
    b = shard_orders(40, 4, 6, seed=11)
    c = shard_orders(40, 4, 6, seed=12)
    for sa, sb in zip(a, b):
        for oa, ob in zip(sa, sb):
            np.testing.assert_array_equal(oa, ob)
    flat_a = np.concatenate([o for shard in a for o in shard[1:]])
    flat_c = np.concatenate([o for shard in c for o in shard[1:]])
    assert not np.array_equal(flat_a, flat_c)
    # The random orders are not all the identity.
    assert any(not np.array_equal(o, np.arange(len(o))) for shard in a for o in shard[1:])


@pytest.mark.parametrize("shards", [0, 1, -2, 11])
def test_shard_orders_reject_invalid_shard_counts(shards):
    with pytest.raises(ValueError, match="shards"):
        shard_orders(10, shards, 3, seed=0)
