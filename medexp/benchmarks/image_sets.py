"""Image-only hub parquet sets used as negative controls (``format: image_set``).

For example huggan/wikiart and zh-plus/tiny-imagenet. The split's shards are read as
``hf_parquet`` reads them (local copy under ``bench.root``, else streamed from the hub with
``HfFileSystem``: only the footers and the row groups needed are fetched).

Sub-sampling (``bench.subsample_n = n``), as in the audit's out-of-domain control: the first
``max(4n, n + 50)`` rows of the split in streamed order form the pool (fewer when the split is
smaller); ``numpy.random.default_rng(bench.subsample_seed).choice(pool, n, replace=False)`` picks
n of them, and the picks are kept in streamed order. Row counts come from the parquet footers,
and reading stops after the last picked row, so nothing past the pool is read.

Examples are image-only: the question is ``""``; the answer is the value of
``bench.label_column`` (a ``ClassLabel`` decoded to its name), or ``""`` when unset. The id is
the row's index in the split; the other scalar columns go to ``meta``.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.hf_parquet import (
    IMAGE_COLUMN,
    ParquetShard,
    image_fields,
    in_split,
    local_shards,
    one_copy,
    read_rows,
    require_columns,
    scalar_meta,
    split_patterns,
)
from medexp.benchmarks.records import SourceRow, assemble

log = logging.getLogger(__name__)


def subsample_pool_size(n: int) -> int:
    """How many leading rows the n picks are drawn from: max(4n, n + 50)."""
    return max(4 * n, n + 50)


def subsample_indices(available: int, n: int, seed: int) -> list[int]:
    """n distinct row indices drawn uniformly from ``range(available)``, in increasing order."""
    import numpy as np

    if n > available:
        raise ValueError(f"cannot sub-sample {n} rows from a split of {available} rows")
    picks = np.random.default_rng(seed).choice(available, size=n, replace=False)
    return sorted(int(index) for index in picks)


def rows_available(shards: list[ParquetShard], wanted: int) -> int:
    """min(wanted, rows in the split), opening only as many shard footers as needed."""
    total = 0
    for shard in shards:
        if total >= wanted:
            break
        total += shard.num_rows
    return min(total, wanted)


def hub_shards(bench_cfg, cache_dir: Path) -> list[ParquetShard]:
    """The split's shards in the hub repo, opened lazily through ``HfFileSystem`` (streaming)."""
    from medexp.benchmarks.hub import require_hub, unavailable

    patterns = split_patterns(bench_cfg.split)
    require_hub(bench_cfg, cache_dir, patterns)
    from huggingface_hub import HfFileSystem

    base = f"datasets/{bench_cfg.hub_id}" + (f"@{quote(bench_cfg.revision, safe='')}" if bench_cfg.revision else "")
    fs = HfFileSystem()
    try:
        found = sorted(path[len(base) + 1 :] for path in fs.glob(f"{base}/**/*.parquet"))
    except Exception as error:  # network, auth, missing repo: all end in the same advice
        raise unavailable(bench_cfg, cache_dir, patterns, f"{type(error).__name__}: {error}") from error
    chosen = [name for name in found if in_split(name, bench_cfg.split)]
    if not chosen:
        raise unavailable(bench_cfg, cache_dir, patterns, f"no parquet files of split {bench_cfg.split!r} in the repo")
    one_copy(chosen, bench_cfg.split, f"hub dataset {bench_cfg.hub_id}")
    log.info("bench=%s: streaming %d parquet shard(s) of %s", bench_cfg.name, len(chosen), bench_cfg.hub_id)
    return [ParquetShard(name, functools.partial(fs.open, f"{base}/{name}", "rb")) for name in chosen]


def _rows(shards: list[ParquetShard], bench_cfg, root: Path | None, cache_dir: Path) -> Iterator[SourceRow]:
    keep = None
    if bench_cfg.subsample_n is not None:
        n = bench_cfg.subsample_n
        available = rows_available(shards, subsample_pool_size(n))
        keep = subsample_indices(available, n, bench_cfg.subsample_seed)
        log.info("bench=%s: %d rows drawn from the first %d (seed %d)", bench_cfg.name, n, available, bench_cfg.subsample_seed)
    label = bench_cfg.label_column
    for index, row in read_rows(shards, keep):
        yield SourceRow(
            source_id=index,
            question="",
            answer="" if label is None or row[label] is None else str(row[label]),
            meta=scalar_meta(row, (IMAGE_COLUMN,)),
            **image_fields(row[IMAGE_COLUMN], root, cache_dir, f"row {index}"),
        )


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load (and sub-sample) a ``format: image_set`` split from ``bench.root`` or the hub."""
    from medexp.benchmarks.hub import dataset_root

    if bench_cfg.root:
        root = dataset_root(bench_cfg, cache_dir, [])
        shards = local_shards(root, bench_cfg.split)
    else:
        root = None
        shards = hub_shards(bench_cfg, Path(cache_dir))
    require_columns(shards[0], [IMAGE_COLUMN] + ([bench_cfg.label_column] if bench_cfg.label_column else []))
    rows = _rows(shards, bench_cfg, root, Path(cache_dir))
    files = [root / shard.name if root is not None else f"{bench_cfg.hub_id}/{shard.name}" for shard in shards]
    return assemble(bench_cfg.name, bench_cfg.split, rows, bench_cfg.max_examples, files=files)
