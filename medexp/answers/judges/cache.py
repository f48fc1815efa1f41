"""Verdicts kept by (judge, probe, reply), so that a cell judged again by a costly judge (a judge
model) asks it only about replies it has not read: another cell, a forced rerun or another
detector over the same replies reuses them.

One SQLite file under the cache folder (``verdicts.sqlite``): SQLite's own locking serialises
processes writing at once, and a row is written in one transaction, whole or not at all. The key
of a judge is a hash of its settings (for a judge model, the endpoint and model it asks and the
prompt) and :data:`VERDICTS_VERSION`; the key of a reply is a hash of what the judge reads of the
probe (question, options and the labels it shows them under, gold, refusal option, answer type) and
the reply. An ``error`` reading (a failed request) is never kept: it is asked again next time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medexp.answers.judges.base import Reading, Verdict
from medexp.kernel.hashing import stable_hash

VERDICTS_VERSION = "verdicts-v1"  # bump when a change alters what a kept verdict means
_FILE = "verdicts.sqlite"
_BATCH = 500  # keys per lookup query (SQLite caps the number of parameters)


def judge_key(settings: Any) -> str:
    return stable_hash({"version": VERDICTS_VERSION, "judge": settings}, length=32)


def reply_key(probe, reply: str) -> str:
    from medexp.probes.choice import EXAMPLE_META

    read = [probe.kind, probe.question, list(probe.options) if probe.options else None, probe.gold, probe.refusal,
            probe.meta.get(EXAMPLE_META, {}).get("answer_type"), reply]
    if probe.labels is not None:  # "2" means another option under other labels; letter-labelled keys stay as they were
        read.append(list(probe.labels))
    return stable_hash(read, length=32)


class VerdictCache:
    """The kept verdicts of one judge (``settings``) under ``cache_dir``."""

    def __init__(self, cache_dir: str | Path, settings: Any):
        self.path = Path(cache_dir) / _FILE
        self.judge = judge_key(settings)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute("CREATE TABLE IF NOT EXISTS verdicts (judge TEXT, reply TEXT, committed TEXT, verdict TEXT, "
                           "reason TEXT, score REAL, PRIMARY KEY (judge, reply))")
        return connection

    def get(self, keys: Sequence[str]) -> dict[str, Reading]:
        """The kept readings of the replies ``keys`` (those without one are absent)."""
        found: dict[str, Reading] = {}
        with self._connect() as connection:
            for start in range(0, len(keys), _BATCH):
                chunk = list(keys[start:start + _BATCH])
                marks = ",".join("?" * len(chunk))
                rows = connection.execute(f"SELECT reply, committed, verdict, reason, score FROM verdicts WHERE judge = ? "
                                          f"AND reply IN ({marks})", [self.judge, *chunk])
                for key, committed, verdict, reason, score in rows:
                    found[key] = Reading(committed, Verdict(verdict), reason, score)
        return found

    def put(self, readings: dict[str, Reading]) -> None:
        """Keep ``readings`` (by reply key); error readings are left out."""
        rows = [(self.judge, key, reading.committed, reading.verdict.value, reading.reason, reading.score)
                for key, reading in readings.items() if reading.verdict is not Verdict.error]
        if rows:
            with self._connect() as connection:
                connection.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?)", rows)
