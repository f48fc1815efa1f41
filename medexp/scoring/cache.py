"""Content-addressed, resumable cache of score tables (parquet), on :mod:`medexp.shards`.

A table is computed in shards of consecutive items (parquet files); once all exist they are
joined into ``table.parquet``, and only then is the entry marked complete.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pandas as pd

from medexp.atomic import atomic_write_parquet
from medexp.hashing import stable_hash
from medexp.shards import fill_shards, is_complete, mark_complete


class ScoreCache:
    """Tables keyed by a hash of everything that determines their content."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def entry(self, key_payload: Any) -> Path:
        return self.root / stable_hash(key_payload, length=24)

    def get_or_compute(
        self,
        key_payload: Any,
        n_items: int,
        shard_size: int,
        compute: Callable[[int, int], pd.DataFrame],
        desc: str = "scoring",
    ) -> pd.DataFrame:
        """Return the cached table, computing (only) the missing shards of ``range(n_items)``."""
        entry = self.entry(key_payload)
        final = entry / "table.parquet"
        if is_complete(entry):
            return pd.read_parquet(final)

        def ensure(start: int, stop: int, path: Path) -> pd.DataFrame:
            if path.is_file():
                return pd.read_parquet(path)
            shard = compute(start, stop)
            atomic_write_parquet(shard, path)
            return shard

        shards = fill_shards(entry, key_payload, n_items, shard_size,
                             lambda start, stop: f"shard-{start:07d}-{stop:07d}.parquet", ensure, desc)
        atomic_write_parquet(pd.concat(shards, ignore_index=True), final)
        mark_complete(entry, {"rows": sum(len(s) for s in shards)})
        # Read back so a fresh, a resumed and a cached table have identical column types.
        return pd.read_parquet(final)
