"""Response tables cached like score tables: content-addressed, sharded, resumable, verified.

The key holds the model (its settings and the bytes of its local weights), the answer settings
and the probe set's content (ids, questions, options, golds, refusal letters, meta and each
image's bytes). A black-box model's shard that holds ``error`` rows (a timeout, an HTTP 503) is
asked again on the next run instead of being reused; every other row is kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from medexp.answers.table import Status, as_response_table

ANSWERS_VERSION = "answers-v1"  # bump when a change alters any response
PROBE_SHARD = 256


def probe_set_hash(probes: Sequence, cache_dir: str | Path) -> str:
    """Hash of everything about the probes that can change an answer (image bytes, not paths)."""
    from medexp.benchmarks.digests import DigestCache

    images = [probe.image for probe in probes if probe.image is not None]
    digests = iter(DigestCache(cache_dir).digests(images))
    digest = hashlib.sha256()
    for probe in probes:
        record = [probe.probe_id, probe.kind, probe.question, list(probe.options) if probe.options else None,
                  probe.gold, probe.refusal, next(digests) if probe.image is not None else None, probe.meta]
        digest.update(json.dumps(record, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()[:32]


def cached_answers(
    key: dict,
    probes: Sequence,
    cache_dir: str | Path,
    compute: Callable[[list], pd.DataFrame],
    retry_errors: bool,
    desc: str,
) -> pd.DataFrame:
    """The response table of ``probes`` under ``key``, computing only what is not cached."""
    from medexp.scoring.cache import ScoreCache

    probes = list(probes)

    def refuse(shard: pd.DataFrame) -> str | None:
        errors = int((shard["status"] == Status.error.value).sum())
        return f"it holds {errors} error row(s) from the model; asking again" if retry_errors and errors else None

    full_key = {"table": "responses", "version": ANSWERS_VERSION, **key, "probes": probe_set_hash(probes, cache_dir)}
    table = ScoreCache(Path(cache_dir) / "responses").get_or_compute(
        full_key, [probe.probe_id for probe in probes], "probe_id", PROBE_SHARD,
        lambda start, stop: compute(probes[start:stop]), desc=desc, refuse=refuse,
    )
    return as_response_table(table, [probe.probe_id for probe in probes])
