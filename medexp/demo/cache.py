"""Where generated demo data and demo models live in the cache (content-addressed)."""

from __future__ import annotations

from pathlib import Path

from medexp.hashing import stable_hash


def demo_benchmark_root(demo_cfg, cache_dir: str | Path) -> Path:
    """Generate the demo benchmark for these settings once, and return its root."""
    from medexp.demo.benchmark import GENERATOR_VERSION, write_benchmark

    settings = {"n_test": demo_cfg.n_test, "n_train": demo_cfg.n_train, "seed": demo_cfg.seed}
    root = Path(cache_dir) / "demo" / f"bench-{stable_hash([GENERATOR_VERSION, settings])}"
    return write_benchmark(root, **settings)
