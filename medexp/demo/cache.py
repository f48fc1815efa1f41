"""Where generated demo data and demo models live in the cache (content-addressed)."""

from __future__ import annotations

from pathlib import Path

from medexp.kernel.hashing import stable_hash


def demo_benchmark_root(demo_cfg, cache_dir: str | Path) -> Path:
    """Generate the demo benchmark for these settings once, and return its root."""
    from medexp.demo.benchmark import GENERATOR_VERSION, write_benchmark

    settings = {"n_test": demo_cfg.n_test, "n_train": demo_cfg.n_train, "n_heldout": demo_cfg.n_heldout,
                "seed": demo_cfg.seed}
    root = Path(cache_dir) / "demo" / f"bench-{stable_hash([GENERATOR_VERSION, settings])}"
    return write_benchmark(root, **settings)


def demo_corpus_root(bench_cfg, cache_dir: str | Path) -> Path:
    """Generate the demo reference corpus (and the demo benchmark it copies) once; return its root."""
    from medexp.config.schemas import DemoBenchConfig, DemoCorpusConfig
    from medexp.demo.corpus import GENERATOR_VERSION, write_corpus

    bench = bench_cfg.demo if bench_cfg.demo is not None else DemoBenchConfig()
    corpus = bench_cfg.demo_corpus if bench_cfg.demo_corpus is not None else DemoCorpusConfig()
    settings = {
        "n_distractors": corpus.n_distractors, "n_planted": corpus.n_planted, "n_ood": corpus.n_ood, "seed": corpus.seed
    }
    bench_root = demo_benchmark_root(bench, cache_dir)
    root = Path(cache_dir) / "demo" / f"corpus-{stable_hash([GENERATOR_VERSION, settings, bench_root.name])}"
    return write_corpus(root, bench_root, **settings)


def demo_classes_root(classes_cfg, cache_dir: str | Path) -> Path:
    """Generate the demo classification set for these settings once, and return its root."""
    from medexp.demo.classes import GENERATOR_VERSION, write_classes

    from medexp.demo.classes import DEFAULT_WEIGHTS

    weights = classes_cfg.class_weights
    settings = {"labels": classes_cfg.labels, "n_images": classes_cfg.n_images,
                "class_weights": dict(DEFAULT_WEIGHTS.get(classes_cfg.labels, {}) if weights is None else weights),
                "seed": classes_cfg.seed}
    root = Path(cache_dir) / "demo" / f"classes-{stable_hash([GENERATOR_VERSION, settings])}"
    return write_classes(root, **settings)
