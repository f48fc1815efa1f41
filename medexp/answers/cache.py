"""Response tables cached like score tables: content-addressed, sharded, resumable, verified.

The key holds the model (its settings and the bytes of its local weights), the answer settings
and the probe set's content (ids, questions, options, golds, refusal letters, meta and each
image's bytes). Only answers are reused: a stored shard that holds ``error`` rows (a timeout, an
HTTP 503, a refused key's probes never reach it) is completed by asking exactly those probes
again; its answered rows are kept as they are.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from medexp.answers.table import Status, as_response_table

ANSWERS_VERSION = "answers-v2"  # bump when a change alters any response (v2: replies kept raw, judged apart)
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
        if probe.labels is not None:  # only then, so that the hashes of letter-labelled probes stay as they were
            record.append(list(probe.labels))
        digest.update(json.dumps(record, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()[:32]


def cached_answers(
    key: dict,
    probes: Sequence,
    cache_dir: str | Path,
    compute: Callable[[list], pd.DataFrame],
    desc: str,
) -> pd.DataFrame:
    """The response table of ``probes`` under ``key``, asking ``compute`` only for the probes
    without a cached answer."""
    from medexp.scoring.cache import ScoreCache

    probes = list(probes)
    ids = [probe.probe_id for probe in probes]

    def refuse(shard: pd.DataFrame) -> str | None:
        errors = int((shard["status"] == Status.error.value).sum())
        return f"it holds {errors} probe(s) without an answer; asking those again" if errors else None

    def redo(shard: pd.DataFrame, start: int, stop: int) -> pd.DataFrame:
        failed = (shard["status"] == Status.error.value).to_numpy()
        asked = compute([probe for probe, again in zip(probes[start:stop], failed) if again])
        merged = pd.concat([shard[~failed], asked], ignore_index=True).set_index("probe_id", drop=False)
        return as_response_table(merged.loc[ids[start:stop]].reset_index(drop=True), ids[start:stop])

    full_key = {"table": "responses", "version": ANSWERS_VERSION, **key, "probes": probe_set_hash(probes, cache_dir)}
    table = ScoreCache(Path(cache_dir) / "responses").get_or_compute(
        full_key, ids, "probe_id", PROBE_SHARD, lambda start, stop: compute(probes[start:stop]), desc=desc,
        refuse=refuse, redo=redo,
    )
    return as_response_table(table, ids)
