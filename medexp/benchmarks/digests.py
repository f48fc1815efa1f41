"""SHA-256 digests of image files, computed once per file version.

A digest is remembered in a small SQLite table keyed by the file's resolved path, size and
modification time (nanoseconds), so checking the content of a corpus of millions of images costs
one ``stat`` per file after the first pass. A file whose size or mtime changed is hashed again.
SQLite serialises concurrent writers (several cells, several processes) by itself.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from medexp.kernel.hashing import file_sha256

_SCHEMA = "CREATE TABLE IF NOT EXISTS digests (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, sha256 TEXT)"


class DigestCache:
    """Digests of files, remembered by (resolved path, size, mtime_ns) in ``<cache_dir>/digests.sqlite``."""

    def __init__(self, cache_dir: str | Path):
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        self.path = Path(cache_dir) / "digests.sqlite"

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute(_SCHEMA)
        return connection

    def digests(self, paths: Sequence[str | Path]) -> list[str]:
        """The SHA-256 of each file (in order); a missing file raises FileNotFoundError naming it."""
        stats = []
        for path in paths:
            resolved = os.path.realpath(path)
            stat = os.stat(resolved)
            stats.append((resolved, stat.st_size, stat.st_mtime_ns))
        connection = self._connect()
        try:
            known = dict(_known(connection, {entry[0] for entry in stats}))
            result, fresh = [], []
            for resolved, size, mtime in stats:
                remembered = known.get(resolved)
                if remembered is not None and remembered[:2] == (size, mtime):
                    result.append(remembered[2])
                    continue
                value = file_sha256(resolved)
                known[resolved] = (size, mtime, value)
                fresh.append((resolved, size, mtime, value))
                result.append(value)
            if fresh:
                with connection:
                    connection.executemany("INSERT OR REPLACE INTO digests VALUES (?, ?, ?, ?)", fresh)
        finally:
            connection.close()
        return result

    def digest(self, path: str | Path) -> str:
        return self.digests([path])[0]


def _known(connection: sqlite3.Connection, paths: Iterable[str]) -> Iterable[tuple[str, tuple[int, int, str]]]:
    paths = list(paths)
    for start in range(0, len(paths), 500):  # SQLite's bound-parameter limit
        chunk = paths[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for path, size, mtime, value in connection.execute(
            f"SELECT path, size, mtime_ns, sha256 FROM digests WHERE path IN ({marks})", chunk
        ):
            yield path, (size, mtime, value)
