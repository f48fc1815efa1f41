"""Where a benchmark's files come from: ``bench.root`` when set, else the Hugging Face hub.

The hub is contacted only when ``bench.root`` is unset. When it cannot be reached (offline mode
with ``HF_HUB_OFFLINE=1``, no network, a gated or missing repo) the error names the hub id, the
exact ``hf download`` command that fetches the files the loader reads, and the ``bench.root=...``
override that points the loader at them.
"""

from __future__ import annotations

import logging
import os
import shlex
from pathlib import Path
from typing import Sequence

log = logging.getLogger(__name__)

_TRUE = {"1", "true", "yes", "on"}


class BenchmarkUnavailable(FileNotFoundError):
    """The benchmark has no local copy and cannot be fetched from the hub."""


def hub_offline() -> bool:
    """True when the user asked huggingface_hub not to use the network."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def download_dir(bench_cfg, cache_dir: Path) -> Path:
    """The folder the download command in error messages writes to."""
    return Path(cache_dir) / "benchmarks" / "downloads" / bench_cfg.name


def unavailable(bench_cfg, cache_dir: Path, allow_patterns: Sequence[str], reason: str) -> BenchmarkUnavailable:
    """An error telling the user what to download, with which command, and how to point at it."""
    target = download_dir(bench_cfg, cache_dir)
    command = ["hf", "download", bench_cfg.hub_id, "--repo-type", "dataset"]
    if bench_cfg.revision:
        command += ["--revision", bench_cfg.revision]
    for pattern in allow_patterns:
        command += ["--include", pattern]
    command += ["--local-dir", str(target)]
    return BenchmarkUnavailable(
        f"bench={bench_cfg.name}: no local copy (bench.root is unset) and the hub dataset "
        f"{bench_cfg.hub_id!r} cannot be read: {reason}\n"
        f"Download it on a machine with network access:\n  {shlex.join(command)}\n"
        f"then copy that folder here if needed and run with bench.root={target}"
    )


def dataset_root(bench_cfg, cache_dir: Path, allow_patterns: Sequence[str]) -> Path:
    """The folder holding the benchmark's files in their upstream layout.

    ``bench.root`` when set; otherwise a snapshot of the files of ``bench.hub_id`` matching
    ``allow_patterns`` (fetched once into the huggingface_hub cache).
    """
    if bench_cfg.root:
        root = Path(bench_cfg.root).expanduser()
        if not root.is_dir():
            raise FileNotFoundError(f"bench={bench_cfg.name}: bench.root={root} is not a directory")
        return root
    require_hub(bench_cfg, cache_dir, allow_patterns)
    from huggingface_hub import snapshot_download

    log.info("bench=%s: fetching %s (%s) from the hub", bench_cfg.name, bench_cfg.hub_id, ", ".join(allow_patterns))
    try:
        path = snapshot_download(
            bench_cfg.hub_id, repo_type="dataset", revision=bench_cfg.revision, allow_patterns=list(allow_patterns)
        )
    except Exception as error:  # network, auth, missing repo: all end in the same advice
        raise unavailable(bench_cfg, cache_dir, allow_patterns, f"{type(error).__name__}: {error}") from error
    return Path(path)


def require_hub(bench_cfg, cache_dir: Path, allow_patterns: Sequence[str]) -> None:
    """Fail fast, before any network call, when there is no hub id or the hub is switched off."""
    if not bench_cfg.hub_id:
        raise ValueError(
            f"bench={bench_cfg.name}: set bench.root=/path/to/{bench_cfg.name} "
            f"(bench.hub_id is unset, so there is nothing to download)"
        )
    if hub_offline():
        raise unavailable(bench_cfg, cache_dir, allow_patterns, "HF_HUB_OFFLINE is set")
