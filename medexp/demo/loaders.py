"""The generated formats' loaders (``demo``, ``demo_corpus``, ``demo_classes``), named in the
benchmark loader table: each generates its data into the cache on first use and reads it with the
loader of the layout it is written in."""

from __future__ import annotations

from pathlib import Path

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.classification import image_folder
from medexp.benchmarks.local import load_local
from medexp.demo.cache import demo_benchmark_root, demo_classes_root, demo_corpus_root


def load_demo(bench_cfg, cache_dir: Path) -> Benchmark:
    """The offline demo benchmark, generated into the cache on first use."""
    root = demo_benchmark_root(bench_cfg.demo, cache_dir)
    return load_local(bench_cfg.name, root, bench_cfg.split, bench_cfg.max_examples)


def load_demo_corpus(bench_cfg, cache_dir: Path) -> Benchmark:
    """The demo image_nn reference corpus (splits ``corpus`` and ``ood``; see medexp.demo.corpus),
    generated on first use."""
    root = demo_corpus_root(bench_cfg, cache_dir)
    return load_local(bench_cfg.name, root, bench_cfg.split, bench_cfg.max_examples)


def load_demo_classes(bench_cfg, cache_dir: Path) -> Benchmark:
    """The generated demo classification set, written into the cache on first use."""
    from medexp.config.schemas import DemoClassesConfig

    settings = bench_cfg.demo_classes if bench_cfg.demo_classes is not None else DemoClassesConfig()
    root = demo_classes_root(settings, cache_dir)
    return image_folder(bench_cfg.name, root / "images", bench_cfg.split, bench_cfg.max_examples)
