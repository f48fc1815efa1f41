"""Content-addressed, resumable cache of score tables (parquet).

A table is computed in shards of consecutive items; each shard is written atomically, so an
interrupted run resumes where it stopped, and the table only counts as complete once its
``complete.json`` marker exists (written last, also atomically).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from medexp.atomic import atomic_write_bytes, atomic_write_parquet
from medexp.hashing import stable_hash

_MARKER = "complete.json"
log = logging.getLogger(__name__)


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
        if (entry / _MARKER).is_file():
            return pd.read_parquet(final)
        from tqdm.auto import tqdm

        entry.mkdir(parents=True, exist_ok=True)
        log.info("%s: %d items, cached (resumable) in %s", desc, n_items, entry)
        atomic_write_bytes(entry / "key.json", json.dumps(key_payload, sort_keys=True, default=str, indent=1).encode())
        starts = range(0, n_items, shard_size)
        shards = []
        with tqdm(total=n_items, desc=desc, unit="item", disable=None) as progress:
            for start in starts:
                stop = min(start + shard_size, n_items)
                path = entry / f"shard-{start:07d}-{stop:07d}.parquet"
                if path.is_file():
                    shard = pd.read_parquet(path)
                else:
                    shard = compute(start, stop)
                    atomic_write_parquet(shard, path)
                shards.append(shard)
                progress.update(stop - start)
        atomic_write_parquet(pd.concat(shards, ignore_index=True), final)
        atomic_write_bytes(entry / _MARKER, json.dumps({"rows": sum(len(s) for s in shards)}).encode())
        # Read back so a fresh, a resumed and a cached table have identical column types.
        return pd.read_parquet(final)
