"""Atomic file writes: a reader sees the old file or the whole new one, never a partial one."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("medexp")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path``; renamed onto it when the block succeeds, removed otherwise."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_parquet(frame, path: Path) -> None:
    """Write a pandas DataFrame as parquet (without its index), atomically."""
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def build_directory_once(target: Path, manifest: str, build: Callable[[Path], dict]) -> Path:
    """``target``, built first unless ``target/manifest`` exists.

    ``build(staging)`` fills an empty staging directory beside ``target`` and returns the record to
    store as ``manifest`` (JSON), written last; the staging directory is then renamed into place.
    A file lock makes concurrent processes build once (the others wait and find it complete), and a
    build that fails or is interrupted leaves no directory that looks complete. A build killed
    outright (SIGKILL, a node lost) leaves its staging directory behind; the next build of
    ``target`` removes it, since whoever holds the lock is the only live builder.
    """
    target = Path(target)
    if (target / manifest).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)

    def progress() -> str:  # what the builder holding the lock has written so far
        written = 0
        for path in target.parent.glob(f".{target.name}.tmp-*/**/*"):
            try:
                written += path.stat().st_size if path.is_file() else 0
            except OSError:  # renamed into place or removed meanwhile
                pass
        return f"{written / 2**20:.1f} MiB written so far"

    with waiting_lock(str(target) + ".lock", f"another process building {target}", progress):
        if (target / manifest).is_file():  # another process built it while this one waited
            return target
        for leftover in target.parent.glob(f".{target.name}.tmp-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        with atomic_directory(target) as staging:  # replaces an incomplete directory of an earlier attempt
            record = build(staging)
            (staging / manifest).write_text(json.dumps(record, indent=1), encoding="utf-8")
    return target


@contextmanager
def atomic_directory(target: Path) -> Iterator[Path]:
    """An empty staging directory beside ``target``, renamed onto it (replacing what is there) when
    the block succeeds and removed otherwise: ``target`` is whole or absent, never half-written."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.tmp-{os.getpid()}"
    try:
        staging.mkdir()
        yield staging
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def waiting_lock(lock_path: str, holder: str, progress: Callable[[], str] | None = None,
                 every_s: float = 15.0) -> Iterator[None]:
    """Hold the file lock at ``lock_path``; while another process holds it, say so every
    ``every_s`` seconds (``holder`` names what it does, ``progress()`` how far it has come), so
    a command that waits is never silent."""
    from filelock import FileLock, Timeout

    lock, started = FileLock(lock_path), time.monotonic()
    while True:
        try:
            lock.acquire(timeout=every_s)
            break
        except Timeout:
            done = f"; {progress()}" if progress is not None else ""
            log.info("waiting for %s (lock %s, %.0f s so far%s)", holder, lock_path, time.monotonic() - started, done)
    try:
        yield
    finally:
        lock.release()


class DiskFull(OSError):
    """A write failed for want of space; the message names the path and the space left there."""


# errno values of a write refused for space: ENOSPC (device full) and EDQUOT (quota exceeded).
_SPACE_ERRNOS = {28, 122}
# How sqlite and a tracking server's 500 say the same thing in words (no errno reaches the client).
_SPACE_WORDS = ("database or disk is full", "no space left on device", "disk quota exceeded")


def disk_full(error: BaseException, where: str | Path | None = None) -> DiskFull | None:
    """A :class:`DiskFull` naming the path and its free space when ``error`` (or an error it was
    raised from) is a write refused for space; None otherwise. ``where`` names the path when the
    error does not (sqlite's and a server's messages carry no file name)."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, DiskFull):
            return cause
        if (isinstance(cause, OSError) and cause.errno in _SPACE_ERRNOS) or any(
            words in str(cause).lower() for words in _SPACE_WORDS
        ):
            # a copy names its source, then its destination (filename2): where the space ran out
            path = getattr(cause, "filename2", None) or getattr(cause, "filename", None) or where
            said = str(cause).splitlines()[0] if str(cause) else ""  # SQLAlchemy appends the statement
            full = DiskFull(f"no space left for {path or 'a write'}: {_free_space(path)} ({type(cause).__name__}: {said})")
            full.path = str(path) if path else None  # not OSError's filename: it would rewrite the message
            return full
        cause = cause.__cause__ or cause.__context__
    return None


def _free_space(path: str | Path | None) -> str:
    """The free space on the filesystem holding ``path`` (its nearest existing folder), in words."""
    if path is None:
        return "free space unknown"
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return "free space unknown"
    return f"{free / 2**20:.1f} MiB free on the filesystem of {probe}"
