"""Content-addressed, resumable, verified cache of score tables (parquet), on :mod:`medexp.kernel.shards`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from medexp.kernel.shards import InvalidShard, ShardedEntry


class ScoreCache:
    """Tables keyed by a hash of everything that determines their content.

    A table has ``rows_per_item`` consecutive rows per item (``item_ids``, in order), named in column
    ``id_column``; each shard is checked to hold exactly its items, in order, before it is used.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def entry(self, key_payload: Any, item_ids: Sequence[str], shard_size: int) -> ShardedEntry:
        return ShardedEntry(self.root, key_payload, item_ids, shard_size, ".parquet")

    def get_or_compute(
        self,
        key_payload: Any,
        item_ids: Sequence[str],
        id_column: str,
        shard_size: int,
        compute: Callable[[int, int], pd.DataFrame],
        desc: str = "scoring",
        rows_per_item: int = 1,
        refuse: Callable[[pd.DataFrame], str | None] | None = None,
        redo: Callable[[pd.DataFrame, int, int], pd.DataFrame] | None = None,
    ) -> pd.DataFrame:
        """The cached table, computing (only) the missing or invalid shards of ``item_ids``.

        ``refuse(shard)`` may name a reason a shard stored by an earlier run must be computed
        again (e.g. it holds transient API errors); None accepts it. ``redo(shard, start, stop)``
        then makes the new shard from the refused one (e.g. computing its failed rows only);
        without it the shard is computed whole. A shard computed by this call is kept whatever it
        holds: asking again at once would give the same answer."""
        fresh: set[str] = set()  # the first item of each shard computed by this call
        refused: dict[str, pd.DataFrame] = {}  # first item -> a shard refuse() turned down

        def write(start: int, stop: int, path: Path) -> None:
            previous = refused.pop(str(item_ids[start]), None)
            if previous is not None and redo is not None:
                table = redo(previous, start, stop)
            else:
                table = compute(start, stop)
            table.to_parquet(path, index=False)
            fresh.add(str(item_ids[start]))

        def read(path: Path, ids: list[str]) -> pd.DataFrame:
            shard = pd.read_parquet(path)
            expected = [item for item in ids for _ in range(rows_per_item)]
            if id_column not in shard.columns or [str(value) for value in shard[id_column]] != expected:
                raise InvalidShard(f"its {id_column!r} column does not list the shard's items in order")
            problem = refuse(shard) if refuse is not None and str(ids[0]) not in fresh else None
            if problem:
                refused[str(ids[0])] = shard
                raise InvalidShard(problem)
            return shard

        shards = self.entry(key_payload, item_ids, shard_size).load(write, read, desc)
        return pd.concat(shards, ignore_index=True)
