"""ScoreCache (resumable sharded parquet tables) and shard_orders."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from medexp.scoring import shard_orders
from medexp.scoring.cache import ScoreCache

KEY = {"table": "unit", "version": 1, "model": "m"}
N_ITEMS, SHARD = 10, 3  # shards [0,3) [3,6) [6,9) [9,10)
IDS = [f"item-{i}" for i in range(N_ITEMS)]


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


def get(cache: ScoreCache, compute, key=KEY, ids=IDS) -> pd.DataFrame:
    return cache.get_or_compute(key, ids, "name", SHARD, compute)


def expected_table() -> pd.DataFrame:
    return Compute()(0, N_ITEMS)


def files(entry: Path) -> set[str]:
    return {p.name for p in entry.iterdir()}


def shard_files(entry: Path) -> list[Path]:
    return sorted(path for path in entry.iterdir() if path.name.startswith("shard-") and path.suffix == ".parquet")


def entry_dir(cache: ScoreCache, key=KEY) -> Path:
    return cache.entry(key, IDS, SHARD).path


def test_table_round_trips(tmp_path):
    cache = ScoreCache(tmp_path)
    compute = Compute()
    fresh = get(cache, compute)
    pd.testing.assert_frame_equal(fresh, expected_table())
    assert compute.calls == [(0, 3), (3, 6), (6, 9), (9, 10)]
    entry = entry_dir(cache)
    assert {"complete.json", "key.json"} <= files(entry)
    assert len(shard_files(entry)) == 4
    assert not [name for name in files(entry) if name.endswith(".tmp")]
    marker = json.loads((entry / "complete.json").read_text())
    assert marker["rows"] == N_ITEMS and len(marker["shards"]) == 4
    assert all(len(shard["sha256"]) == 64 for shard in marker["shards"])
    cached = get(ScoreCache(tmp_path), compute)
    pd.testing.assert_frame_equal(cached, expected_table())
    assert len(compute.calls) == 4  # nothing recomputed once complete


def test_complete_table_never_calls_compute(tmp_path):
    cache = ScoreCache(tmp_path)
    get(cache, Compute())

    def boom(start, stop):
        raise AssertionError("compute called on a complete table")

    assert len(get(cache, boom)) == N_ITEMS


def test_keys_are_content_addressed(tmp_path):
    cache = ScoreCache(tmp_path)
    assert entry_dir(cache, {"a": 1, "b": 2}) == entry_dir(cache, {"b": 2, "a": 1})
    assert entry_dir(cache) != entry_dir(cache, {**KEY, "model": "other"})
    get(cache, Compute())
    other = Compute()
    get(cache, other, key={**KEY, "model": "other"})
    assert len(other.calls) == 4


def test_interrupted_run_resumes_only_missing_shards(tmp_path):
    cache = ScoreCache(tmp_path)
    failing = Compute(fail_on_call=2)
    with pytest.raises(RuntimeError, match="injected failure"):
        get(cache, failing)
    entry = entry_dir(cache)
    assert not (entry / "complete.json").exists()
    assert [path.name for path in shard_files(entry)] == ["shard-000000000-000000003.parquet"]
    assert not [name for name in files(entry) if name.endswith(".tmp")]

    resumed = Compute()
    table = get(cache, resumed)
    assert resumed.calls == [(3, 6), (6, 9), (9, 10)]
    pd.testing.assert_frame_equal(table, expected_table())
    assert (entry / "complete.json").is_file()
    uninterrupted = get(ScoreCache(tmp_path / "other"), Compute())
    pd.testing.assert_frame_equal(table, uninterrupted)


def test_leftover_temp_file_is_never_read_as_a_shard(tmp_path):
    cache = ScoreCache(tmp_path)
    entry = entry_dir(cache)
    entry.mkdir(parents=True)
    # What a crash in the middle of an atomic write leaves behind: garbage, or a valid parquet
    # with the wrong content, under the temp name.
    (entry / ".shard-000000000-000000003.parquet.abc123.tmp").write_bytes(b"not parquet at all")
    pd.DataFrame({"item": [99], "value": [0.0], "name": ["bad"], "flag": [True]}).to_parquet(
        entry / ".shard-000000003-000000006.parquet.def456.tmp", index=False
    )
    compute = Compute()
    table = get(cache, compute)
    assert compute.calls == [(0, 3), (3, 6), (6, 9), (9, 10)]
    pd.testing.assert_frame_equal(table, expected_table())


def test_missing_marker_reuses_shards_that_match_their_sidecars(tmp_path):
    """A crash between the last shard and the marker: the shards are verified and reused."""
    cache = ScoreCache(tmp_path)
    get(cache, Compute())
    (entry_dir(cache) / "complete.json").unlink()
    compute = Compute()
    pd.testing.assert_frame_equal(get(cache, compute), expected_table())
    assert compute.calls == []


def test_list_cells_round_trip_with_equal_values_and_types(tmp_path):
    def compute(start, stop):
        return pd.DataFrame({"name": [str(i) for i in range(start, stop)],
                             "tokens": [[float(i), -1.5] for i in range(start, stop)]})

    cache = ScoreCache(tmp_path)
    ids = [str(i) for i in range(5)]
    fresh = cache.get_or_compute(KEY, ids, "name", 2, compute)
    cached = cache.get_or_compute(KEY, ids, "name", 2, compute)
    assert type(fresh["tokens"].iloc[0]) is type(cached["tokens"].iloc[0])
    for a, b in zip(fresh["tokens"], cached["tokens"]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ---------------------------------------------------------------------------- integrity faults


def _reversed(path: Path) -> None:
    pd.read_parquet(path).iloc[::-1].to_parquet(path, index=False)


def _cut(path: Path) -> None:
    pd.read_parquet(path).iloc[:1].to_parquet(path, index=False)


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(b"PAR1 this is not a parquet file")


def _removed(path: Path) -> None:
    path.unlink()


def _values_changed(path: Path) -> None:
    frame = pd.read_parquet(path)
    frame["value"] = frame["value"] + 1.0
    frame.to_parquet(path, index=False)


@pytest.mark.parametrize("damage", [_reversed, _cut, _truncated, _garbage, _removed, _values_changed])
def test_a_damaged_complete_entry_is_logged_and_recomputed(tmp_path, caplog, damage):
    cache = ScoreCache(tmp_path)
    get(cache, Compute())
    entry = entry_dir(cache)
    damage(shard_files(entry)[1])
    compute = Compute()
    with caplog.at_level(logging.WARNING, logger="medexp.kernel.shards"):
        table = get(cache, compute)
    pd.testing.assert_frame_equal(table, expected_table())
    assert compute.calls == [(3, 6)]  # only the damaged shard; the others still check out
    assert str(entry) in caplog.text and "recomput" in caplog.text


def test_a_marker_for_other_items_is_not_trusted(tmp_path, caplog):
    """An entry recorded for 4 of the items (or another order) never stands in for all 10."""
    cache = ScoreCache(tmp_path)
    get(cache, Compute())
    marker = entry_dir(cache) / "complete.json"
    summary = json.loads(marker.read_text())
    summary["rows"] = 4
    marker.write_text(json.dumps(summary))
    compute = Compute()
    with caplog.at_level(logging.WARNING, logger="medexp.kernel.shards"):
        table = get(cache, compute)
    assert len(table) == N_ITEMS
    assert "records 4 rows" in caplog.text


def test_a_shard_holding_other_items_is_recomputed(tmp_path):
    """Bytes that match the sidecar but list items in another order are never used."""
    cache = ScoreCache(tmp_path)
    calls = []

    def wrong_order(start, stop):
        calls.append((start, stop))
        frame = Compute()(start, stop)
        return frame.iloc[::-1] if len(calls) == 2 else frame

    with pytest.raises(Exception, match="does not list the shard's items in order"):
        get(cache, wrong_order)
    # The bad shard was never recorded as valid: a rerun computes it again.
    compute = Compute()
    pd.testing.assert_frame_equal(get(cache, compute), expected_table())
    assert compute.calls == [(3, 6), (6, 9), (9, 10)]


def test_unreadable_marker_is_logged_and_recomputed(tmp_path, caplog):
    cache = ScoreCache(tmp_path)
    get(cache, Compute())
    (entry_dir(cache) / "complete.json").write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="medexp.kernel.shards"):
        table = get(cache, Compute())
    pd.testing.assert_frame_equal(table, expected_table())
    assert "invalid" in caplog.text


_WORKER = r"""
import sys, time
import numpy as np, pandas as pd
from medexp.scoring.cache import ScoreCache
root, log = sys.argv[1], sys.argv[2]

def compute(start, stop):
    with open(log, "a") as handle:
        handle.write(f"{start}\n")
    time.sleep(0.3)
    return pd.DataFrame({"name": [f"item-{i}" for i in range(start, stop)], "value": np.arange(start, stop) * 1.5})

table = ScoreCache(root).get_or_compute({"k": 1}, [f"item-{i}" for i in range(6)], "name", 2, compute)
print(float(table["value"].sum()))
"""


def test_concurrent_processes_compute_an_entry_once(tmp_path):
    log = tmp_path / "calls.log"
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(tmp_path / "cache"), str(log)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), [err for _, err in outputs]
    assert {out.strip() for out, _ in outputs} == {str(1.5 * sum(range(6)))}
    assert sorted(log.read_text().split()) == ["0", "2", "4"]  # each shard computed by one process only


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
