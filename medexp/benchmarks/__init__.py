"""Benchmark loaders: config -> ordered :class:`Example` records in released order."""

from __future__ import annotations

from pathlib import Path

from medexp.benchmarks.base import Benchmark, Example, SkippedExample


def load_benchmark_from_config(bench_cfg, cache_dir: str | Path) -> Benchmark:
    """Load the benchmark a ``bench`` config describes (demo data is generated on first use)."""
    from medexp.benchmarks.local import load_local
    from medexp.config.schemas import BenchFormat

    fmt = BenchFormat(bench_cfg.format)
    if fmt is BenchFormat.demo:
        from medexp.demo.cache import demo_benchmark_root

        root = demo_benchmark_root(bench_cfg.demo, cache_dir)
    else:
        if not bench_cfg.root:
            raise ValueError(f"bench={bench_cfg.name}: set bench.root=/path/to/{bench_cfg.name} (format {fmt.value})")
        root = Path(bench_cfg.root).expanduser()
    return load_local(bench_cfg.name, root, bench_cfg.split, bench_cfg.max_examples)


__all__ = ["Benchmark", "Example", "SkippedExample", "load_benchmark_from_config"]
