"""Benchmark loaders: config -> ordered :class:`Example` records in released order."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Iterable

from medexp.benchmarks.base import Benchmark, Example, SkippedExample
from medexp.benchmarks.skips import IMAGE_TASK, QUESTION_TASK, TooManySkipped, check_skipped_share, requiring

log = logging.getLogger(__name__)


# format -> "module:function" loading it; modules are imported only when used. The generated
# formats' loaders live with their generator (medexp.demo.loaders).
LOADERS = {
    "local": "medexp.benchmarks.local:load",
    "demo": "medexp.demo.loaders:load_demo",
    "slake": "medexp.benchmarks.slake:load",
    "hf_parquet": "medexp.benchmarks.hf_parquet:load",
    "vqa_rad": "medexp.benchmarks.vqa_rad:load",
    "vqa_rad_osf": "medexp.benchmarks.vqa_rad:load_osf",
    "pathvqa": "medexp.benchmarks.pathvqa:load",
    "omnimedvqa": "medexp.benchmarks.omnimedvqa:load",
    "image_set": "medexp.benchmarks.image_sets:load",
    "pmc_oa": "medexp.benchmarks.pmc_oa:load",
    "demo_corpus": "medexp.demo.loaders:load_demo_corpus",
    "synthetic": "medexp.benchmarks.synthetic:load",
    "medvigil": "medexp.benchmarks.medvigil:load",
    "image_folder": "medexp.benchmarks.classification:load_image_folder",
    "image_csv": "medexp.benchmarks.classification:load_image_csv",
    "demo_classes": "medexp.demo.loaders:load_demo_classes",
    "vlmevalkit_tsv": "medexp.benchmarks.vlmevalkit_tsv:load",
}
# Formats that can be read from their annotations alone, for a cell that reads no pixels:
# format -> "module:function" like a loader's, every example's image None.
ANNOTATION_LOADERS = {"slake": "medexp.benchmarks.slake:load_annotations"}
_HUB_FORMATS = ("slake", "hf_parquet", "vqa_rad", "pathvqa", "omnimedvqa", "image_set", "pmc_oa", "medvigil")
# Formats whose rows are images without questions (corpora): their examples need no text field.
_IMAGE_FORMATS = ("image_set", "pmc_oa", "demo_corpus")
# Optional fields that only some formats read: setting one elsewhere is a mistake, not a no-op.
_FORMAT_FIELDS = {
    "hub_id": _HUB_FORMATS,
    "revision": _HUB_FORMATS,
    "languages": ("slake",),
    "image_dir": ("slake", "pmc_oa", "vqa_rad", "vqa_rad_osf", "pathvqa"),
    "dedup": ("pathvqa",),
    "subsample_n": ("image_set",),
    "label_column": ("image_set", "image_csv"),
    "csv_file": ("image_csv",),
    "image_column": ("image_csv",),
    "image_dirs": ("image_csv",),
    "image_extension": ("image_csv",),
    "demo": ("demo", "demo_corpus"),
    "demo_corpus": ("demo_corpus",),
    "synthetic": ("synthetic",),
    "demo_classes": ("demo_classes",),
    "tsv_file": ("vlmevalkit_tsv",),
    "image_root_from": ("vlmevalkit_tsv",),
    "image_root_to": ("vlmevalkit_tsv",),
}


def check_bench_config(bench_cfg) -> str:
    """Reject settings the config's format does not use or cannot honour; return the format name."""
    from medexp.config.schemas import BenchFormat

    from medexp.config.ranges import validate

    validate(bench_cfg, "bench")
    fmt = BenchFormat(bench_cfg.format).value
    for key, formats in _FORMAT_FIELDS.items():
        if bench_cfg.get(key) is not None and fmt not in formats:
            raise ValueError(f"bench={bench_cfg.name}: bench.{key} is only read by format(s) {list(formats)}, not {fmt}")
    if bench_cfg.get("subsample_n") is not None and bench_cfg.get("max_examples") is not None:
        raise ValueError(f"bench={bench_cfg.name}: set bench.subsample_n or bench.max_examples, not both")
    return fmt


def task_needs(bench_cfg, needs: Iterable[str] | None = None) -> frozenset[str]:
    """The example fields the task reads: ``needs`` when the caller says (a detector scoring free
    text needs no options), else none for an image corpus (``bench.image_only`` or a corpus
    format) and question, answer and options otherwise."""
    from medexp.config.schemas import BenchFormat

    if needs is not None:
        return frozenset(needs)
    if bench_cfg.get("image_only") or BenchFormat(bench_cfg.format).value in _IMAGE_FORMATS:
        return IMAGE_TASK
    return QUESTION_TASK


def expected_count(bench_cfg) -> int | None:
    """The count ``bench.split`` should yield: its entry of ``bench.expected_by_split``, else
    ``bench.expected_examples``; None when the config states none for this split."""
    by_split = bench_cfg.get("expected_by_split")
    if by_split is not None:
        return by_split.get(bench_cfg.split)
    return bench_cfg.get("expected_examples")


def load_benchmark_from_config(bench_cfg, cache_dir: str | Path, needs: Iterable[str] | None = None,
                               check_skips: bool = True, pixels: bool = True) -> Benchmark:
    """Load the benchmark a ``bench`` config describes, in released order.

    Reads ``bench.root`` when set, else the hub (``bench.hub_id``); demo data is generated on
    first use. Rows are skipped for what the task ``needs`` (:func:`task_needs`); more than
    ``bench.max_skipped_share`` of them skipped raises :class:`~medexp.benchmarks.skips.TooManySkipped`
    (``check_skips=False`` leaves that to the caller). Logs a warning when the count differs from
    the split's expected count (:func:`expected_count`). ``pixels=False`` (the caller reads no
    image): a format of :data:`ANNOTATION_LOADERS` is read from its annotations alone, without
    looking for its images; another format loads as usual.
    """
    from medexp.kernel.registry import import_object

    fmt = check_bench_config(bench_cfg)
    annotations_only = not pixels and fmt in ANNOTATION_LOADERS
    load = import_object(ANNOTATION_LOADERS[fmt] if annotations_only else LOADERS[fmt])
    if annotations_only:
        log.info("bench=%s: the cell reads no pixels: loading the annotations alone (no image is looked for)",
                 bench_cfg.name)
    log.info("bench=%s: loading split %s (format %s)", bench_cfg.name, bench_cfg.split, fmt)
    benchmark = requiring(load(bench_cfg, Path(cache_dir)), task_needs(bench_cfg, needs))
    benchmark.annotations_only = annotations_only
    if benchmark.layout is None:  # a format with a single layout
        benchmark.layout = fmt
    if benchmark.skipped:
        log.warning("bench=%s: skipped %d rows: %s (first: %s: %s)", bench_cfg.name, len(benchmark.skipped),
                    dict(Counter(item.kind for item in benchmark.skipped).most_common()),
                    benchmark.skipped[0].label, benchmark.skipped[0].reason)
    if check_skips:
        check_skipped_share(benchmark, bench_cfg.split, bench_cfg.max_skipped_share)
    expected = expected_count(bench_cfg)
    if expected is not None and len(benchmark) != expected:
        log.warning(
            "bench=%s: %d examples, but the config expects %d for split %s (skipped: %d); is the copy complete "
            "and the split right?", bench_cfg.name, len(benchmark), expected, bench_cfg.split, len(benchmark.skipped),
        )
    return benchmark


def load_benchmark(name: str, cache_dir: str | Path | None = None, **overrides) -> Benchmark:
    """The benchmark ``conf/bench/<name>.yaml`` describes, with bench fields overridden.

    For example ``load_benchmark("slake", root="/data/slake", split="test")``. Overrides are
    checked against the bench schema (unknown keys and wrong types fail); ``cache_dir`` defaults
    to the project's (``paths.cache_dir``).
    """
    from medexp.config import compose

    cfg = compose([f"bench={name}"])
    for key, value in overrides.items():
        if key not in cfg.bench:
            raise ValueError(f"load_benchmark: unknown bench field {key!r}; known: {sorted(cfg.bench)}")
        cfg.bench[key] = str(value) if isinstance(value, Path) else value
    return load_benchmark_from_config(cfg.bench, cache_dir if cache_dir is not None else cfg.paths.cache_dir)


__all__ = ["Benchmark", "Example", "SkippedExample", "TooManySkipped", "check_bench_config", "expected_count",
           "load_benchmark", "load_benchmark_from_config", "task_needs"]
