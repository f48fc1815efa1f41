"""Stable content hashes and seeds shared by caches and cells."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def stable_hash(payload: Any, length: int = 16) -> str:
    """Hex digest of a JSON-serialisable payload, independent of dict ordering."""
    text = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def derive_seed(*parts: Any) -> int:
    """A 32-bit seed from any parts (e.g. the global seed and a cell key)."""
    digest = hashlib.sha256("|".join(str(part) for part in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "little")


_CHUNK = 1 << 20  # bytes read at a time by file_sha256


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def directory_sha256(root: str | Path, exclude: tuple[str, ...] = ()) -> str:
    """One digest over every file under ``root`` (relative path and content), in sorted order;
    files named in ``exclude`` are left out."""
    root = Path(root)
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name not in exclude):
        digest.update(f"{path.relative_to(root).as_posix()}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()
