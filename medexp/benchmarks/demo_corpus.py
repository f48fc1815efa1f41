"""``format: demo_corpus``: the generated image_nn reference corpus (splits ``corpus`` and ``ood``)."""

from __future__ import annotations

from pathlib import Path

from medexp.benchmarks.base import Benchmark


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Generate the demo corpus on first use (see medexp.demo.corpus) and read one of its splits."""
    from medexp.benchmarks.local import load_local
    from medexp.demo.cache import demo_corpus_root

    root = demo_corpus_root(bench_cfg, cache_dir)
    return load_local(bench_cfg.name, root, bench_cfg.split, bench_cfg.max_examples)
