"""Content-addressed cache entries computed in resumable, verified shards (score tables,
embeddings, response tables).

An entry is a directory named by a hash of its key; ``key.json`` records the key. Items (examples,
images, probes) are cut into shards of consecutive items; each shard file is written atomically
and followed by a sidecar ``<shard>.json`` holding its row count, the SHA-256 of its bytes and the
hash of the ordered ids of its items. Once every shard exists, ``complete.json`` records the row
count, the hash of all ordered ids and every shard's sidecar.

Nothing is trusted without checking: a complete entry is read only when every shard's bytes,
row count and ids match the marker and the ids the caller needs; a shard is reused on resume only
when it matches its sidecar. Anything else (a missing, truncated, reordered or unreadable shard,
a marker for other ids) is logged with the entry's path and recomputed; the reader's own error
(pyarrow, numpy) never reaches the user. Building an entry holds a file lock (``filelock``), so
concurrent processes compute it once: the second waits, then reads what the first wrote; each
shard is computed under a lock of its own too.

Work bigger than one job (:func:`sharing_work`): several processes, Slurm array tasks or Ray
workers, fill the same entry together. Each starts at its own share of the shards, skips a shard
another process is computing (its lock is held), and waits for those at the end, so every shard is
computed once, by whoever reached it first, and each process ends with the whole entry. A shard is
a function of its items alone, so the entry is byte for byte what one process writes.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from medexp.kernel.atomic import atomic_path, atomic_write_bytes
from medexp.kernel.hashing import file_sha256
from medexp.kernel.hashing import stable_hash

log = logging.getLogger(__name__)

MARKER = "complete.json"
FORMAT = 2  # bump when the entry layout changes; older entries are then rebuilt
Shard = TypeVar("Shard")


class InvalidShard(Exception):
    """A shard file that exists but does not hold what its entry needs."""


@dataclass
class WorkShare:
    """This process's place among ``tasks`` processes filling the same entries (task 0 .. tasks-1),
    and how many shards it computed itself."""

    task: int
    tasks: int
    computed: int = 0

    def first_shard(self, n_shards: int) -> int:
        """Where this task starts in an entry of ``n_shards`` shards: evenly spaced starts, so the
        tasks begin on different shards and meet only at the end."""
        return self.task * n_shards // self.tasks


_share: WorkShare | None = None


@dataclass(frozen=True)
class EntryPlan:
    """The work of an entry not complete yet: what it is, its items and shards, the shards already
    written (by an interrupted run or by other jobs)."""

    desc: str
    path: Path
    items: int
    shards: int
    shard_size: int
    written: int


class Planned(Exception):
    """Raised, in :func:`planning`, by the first entry with shards still to compute."""

    def __init__(self, plan: EntryPlan):
        super().__init__(f"{plan.desc}: {plan.shards} shards to plan")
        self.plan = plan


_planning = False


@contextmanager
def planning() -> Iterator[None]:
    """Within the block, complete entries are read as usual and the first entry that would
    compute a shard raises :class:`Planned` with its plan instead: what a job is about to do."""
    global _planning
    previous, _planning = _planning, True
    try:
        yield
    finally:
        _planning = previous


@contextmanager
def sharing_work(task: int, tasks: int) -> Iterator[WorkShare]:
    """Within the block, entries are filled as task ``task`` of ``tasks`` processes working on them
    at once (see the module's docstring); the yielded share counts the shards computed here."""
    global _share
    if not 0 <= task < tasks:
        raise ValueError(f"task must be in 0..{tasks - 1}, got {task}")
    previous, _share = _share, WorkShare(task, tasks)
    try:
        yield _share
    finally:
        _share = previous


def ids_hash(ids: Sequence[str]) -> str:
    """The hash of an ordered list of item ids (recorded per shard and per entry)."""
    digest = hashlib.sha256()
    for item in ids:
        digest.update(str(item).encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


class ShardedEntry(Generic[Shard]):
    """One cache entry: ``key`` -> the shards of ``item_ids``, in order.

    ``compute(start, stop, path)`` writes the shard of items ``[start, stop)`` to ``path`` (a
    temporary name, renamed into place afterwards); ``read(path, ids)`` returns a shard's content
    and raises when it does not hold exactly ``ids``. ``suffix`` is the shard file extension.
    """

    def __init__(self, root: str | Path, key: Any, item_ids: Sequence[str], shard_size: int, suffix: str):
        if shard_size < 1:
            raise ValueError(f"shard_size must be >= 1, got {shard_size}")
        if not item_ids:
            raise ValueError("a cache entry needs at least one item")
        self.key = key
        self.path = Path(root) / stable_hash(key, length=24)
        self.ids = [str(item) for item in item_ids]
        self.shard_size = shard_size
        self.suffix = suffix

    @property
    def ranges(self) -> list[tuple[int, int]]:
        n = len(self.ids)
        return [(start, min(start + self.shard_size, n)) for start in range(0, n, self.shard_size)]

    def shard_file(self, start: int, stop: int) -> Path:
        return self.path / f"shard-{start:09d}-{stop:09d}{self.suffix}"

    def load(
        self,
        compute: Callable[[int, int, Path], None],
        read: Callable[[Path, list[str]], Shard],
        desc: str,
        unit: str = "item",
    ) -> list[Shard]:
        """The entry's shards, read from a verified complete entry or computed (the missing or
        invalid ones only) under the entry's file lock."""
        from filelock import FileLock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        if _planning:
            shards = self._read_complete(read)
            if shards is None:
                written = sum(self._resumed(self.shard_file(*bounds), *bounds, read)[0] is not None
                              for bounds in self.ranges)
                raise Planned(EntryPlan(desc, self.path, len(self.ids), len(self.ranges), self.shard_size, written))
            return shards
        if _share is not None:
            # Shared with other processes: no entry lock, which would make them take turns.
            return self._read_complete(read) or self._fill(compute, read, desc, unit, _share)
        with FileLock(str(self.path) + ".lock"):
            shards = self._read_complete(read)
            if shards is not None:
                return shards
            return self._fill(compute, read, desc, unit, None)

    # ------------------------------------------------------------------ reading
    def _read_complete(self, read: Callable[[Path, list[str]], Shard]) -> list[Shard] | None:
        marker = self.path / MARKER
        if not marker.is_file():
            return None
        try:
            summary = json.loads(marker.read_text(encoding="utf-8"))
            problem = self._marker_problem(summary)
            if problem is None:
                return [
                    self._verified(self.shard_file(start, stop), recorded, start, stop, read)
                    for (start, stop), recorded in zip(self.ranges, summary["shards"])
                ]
        except (InvalidShard, OSError, ValueError, KeyError, TypeError) as error:
            problem = str(error)
        log.warning("cache entry %s is invalid (%s): recomputing it", self.path, problem)
        marker.unlink(missing_ok=True)
        return None

    def _marker_problem(self, summary: dict) -> str | None:
        if summary.get("format") != FORMAT:
            return f"entry format {summary.get('format')!r}, expected {FORMAT}"
        if summary.get("rows") != len(self.ids):
            return f"it records {summary.get('rows')} rows, the cell needs {len(self.ids)}"
        if summary.get("ids_sha256") != ids_hash(self.ids):
            return "it was computed for other items or another order"
        if len(summary.get("shards", [])) != len(self.ranges):
            return f"it records {len(summary.get('shards', []))} shards, expected {len(self.ranges)}"
        return None

    def _verified(self, path: Path, recorded: dict, start: int, stop: int, read) -> Shard:
        """The shard at ``path`` if it matches ``recorded`` and holds ``ids[start:stop]``."""
        expected = {"rows": stop - start, "ids_sha256": ids_hash(self.ids[start:stop])}
        if not path.is_file():
            raise InvalidShard(f"shard {path.name} is missing")
        for field, value in expected.items():
            if recorded.get(field) != value:
                raise InvalidShard(f"shard {path.name}: recorded {field} does not match the items")
        if file_sha256(path) != recorded.get("sha256"):
            raise InvalidShard(f"shard {path.name}: its bytes changed since it was written")
        try:
            return read(path, self.ids[start:stop])
        except Exception as error:  # a reader's own error (pyarrow, numpy) must not escape
            raise InvalidShard(f"shard {path.name} cannot be read: {type(error).__name__}: {error}") from error

    # ------------------------------------------------------------------ writing
    def _fill(self, compute, read, desc: str, unit: str, share: WorkShare | None) -> list[Shard]:
        from tqdm.auto import tqdm

        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path / "key.json", json.dumps(self.key, sort_keys=True, default=str, indent=1).encode())
        ranges = self.ranges
        first = share.first_shard(len(ranges)) if share else 0
        where = f" as task {share.task} of {share.tasks}" if share else ""
        log.info("%s: %d %ss, cached (resumable) in %s%s", desc, len(self.ids), unit, self.path, where)
        done: dict[int, tuple[Shard, dict]] = {}
        with tqdm(total=len(self.ids), desc=desc, unit=unit, disable=None) as progress:
            # Own share first, skipping shards another process holds; then wait for those.
            order = list(range(first, len(ranges))) + list(range(first))
            for wait in (False, True):
                for index in order:
                    if index in done:
                        continue
                    result = self._shard(compute, read, *ranges[index], wait=wait, share=share)
                    if result is not None:
                        done[index] = result
                        progress.update(ranges[index][1] - ranges[index][0])
        shards = [done[index][0] for index in range(len(ranges))]
        summary = {"format": FORMAT, "rows": len(self.ids), "ids_sha256": ids_hash(self.ids),
                   "shards": [done[index][1] for index in range(len(ranges))]}
        atomic_write_bytes(self.path / MARKER, json.dumps(summary, indent=1).encode())
        return shards

    def _shard(self, compute, read, start: int, stop: int, wait: bool, share: WorkShare | None):
        """Shard ``[start, stop)`` and its record: resumed if valid, else computed under the shard's
        lock. Without ``wait``, None when another process holds that lock (it is computing it)."""
        from filelock import FileLock, Timeout

        path = self.shard_file(start, stop)
        lock = FileLock(str(path) + ".lock")
        try:
            lock.acquire(timeout=-1 if wait else 0)
        except Timeout:
            return None
        try:
            shard, record = self._resumed(path, start, stop, read)
            if shard is None:
                with atomic_path(path) as tmp:
                    compute(start, stop, tmp)
                record = {"file": path.name, "rows": stop - start, "sha256": file_sha256(path),
                          "ids_sha256": ids_hash(self.ids[start:stop])}
                atomic_write_bytes(_sidecar(path), json.dumps(record).encode())
                shard = self._verified(path, record, start, stop, read)
                if share is not None:
                    share.computed += 1
            return shard, record
        finally:
            lock.release()

    def _resumed(self, path: Path, start: int, stop: int, read) -> tuple[Shard | None, dict | None]:
        """A shard left by an interrupted run, if it and its sidecar check out."""
        sidecar = _sidecar(path)
        if not path.is_file() or not sidecar.is_file():
            return None, None
        try:
            record = json.loads(sidecar.read_text(encoding="utf-8"))
            return self._verified(path, record, start, stop, read), record
        except (InvalidShard, OSError, ValueError) as error:
            log.warning("cache entry %s: %s; recomputing that shard", self.path, error)
            return None, None


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")
