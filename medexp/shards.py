"""Content-addressed cache entries computed in resumable shards (score tables, embeddings).

An entry is a directory named by a hash of its key. ``key.json`` records the key; shards of
consecutive items are written atomically, so an interrupted run resumes at the first shard that
is missing; the entry counts as complete only once ``complete.json`` exists (written last).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from medexp.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

MARKER = "complete.json"
Shard = TypeVar("Shard")


def is_complete(entry: Path) -> bool:
    return (entry / MARKER).is_file()


def mark_complete(entry: Path, summary: dict[str, Any]) -> None:
    atomic_write_bytes(entry / MARKER, json.dumps(summary).encode())


def fill_shards(
    entry: Path,
    key: Any,
    n_items: int,
    shard_size: int,
    shard_name: Callable[[int, int], str],
    ensure: Callable[[int, int, Path], Shard],
    desc: str,
    unit: str = "item",
) -> list[Shard]:
    """Record ``key`` in ``entry`` and call ``ensure(start, stop, path)`` for each shard in order.

    ``ensure`` reuses the shard file at ``path`` when it is valid, else computes and writes it
    atomically; its return values are collected. The caller marks the entry complete.
    """
    from tqdm.auto import tqdm

    entry.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(entry / "key.json", json.dumps(key, sort_keys=True, default=str, indent=1).encode())
    log.info("%s: %d %ss, cached (resumable) in %s", desc, n_items, unit, entry)
    shards = []
    with tqdm(total=n_items, desc=desc, unit=unit, disable=None) as progress:
        for start in range(0, n_items, shard_size):
            stop = min(start + shard_size, n_items)
            shards.append(ensure(start, stop, entry / shard_name(start, stop)))
            progress.update(stop - start)
    return shards
