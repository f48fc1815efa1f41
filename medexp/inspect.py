"""``python -m medexp.inspect bench=<name> [bench.root=...] [other overrides]``

Loads one benchmark exactly as a cell would and prints a JSON summary on stdout: name, split,
format, config version, example count, skipped rows by kind, the expected count and whether it
matches, and for every meta field its value counts (or only its number of distinct values when
there are more than ``MAX_LISTED_VALUES``). Log lines and errors go to stderr; the exit status
is non-zero on any error.
"""

from __future__ import annotations

import json
import logging
import sys
from collections import Counter
from typing import Any, Sequence

MAX_LISTED_VALUES = 30
USAGE = """usage: python -m medexp.inspect bench=<name> [bench.root=/path/to/copy] [bench.<field>=<value> ...]

Load a benchmark as `python -m medexp` would and print its counts and strata as JSON.
Example: python -m medexp.inspect bench=slake bench.root=/data/slake"""


def strata(examples) -> dict[str, Any]:
    """Per meta field: value -> count (most common first), or {"n_distinct": k} for many values."""
    counts: dict[str, Counter] = {}
    for example in examples:
        for key, value in example.meta.items():
            counts.setdefault(key, Counter())[_label(value)] += 1
    return {
        key: dict(counter.most_common()) if len(counter) <= MAX_LISTED_VALUES else {"n_distinct": len(counter)}
        for key, counter in counts.items()
    }


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def summarize(benchmark, bench_cfg) -> dict[str, Any]:
    """The JSON-ready summary of a loaded benchmark and the config it came from."""
    from medexp.config.schemas import BenchFormat

    expected = bench_cfg.get("expected_examples")
    return {
        "name": benchmark.name,
        "split": bench_cfg.split,
        "format": BenchFormat(bench_cfg.format).value,
        "version": bench_cfg.get("version"),
        "n_examples": len(benchmark),
        "n_with_image": sum(example.image is not None for example in benchmark.examples),
        "n_skipped": len(benchmark.skipped),
        "skipped": dict(Counter(skip.kind for skip in benchmark.skipped).most_common()),
        "expected_examples": expected,
        "matches_expected": None if expected is None else len(benchmark) == expected,
        "strata": strata(benchmark.examples),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    overrides = list(sys.argv[1:] if argv is None else argv)
    if not overrides or any(arg in ("-h", "--help") for arg in overrides):
        print(USAGE)
        return 0 if overrides else 2
    if not any(arg.startswith("bench=") for arg in overrides):
        print(f"medexp.inspect: error: name the benchmark with bench=<name>\n{USAGE}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        import medexp  # noqa: F401  (registers the config schemas)
        from medexp.benchmarks import load_benchmark_from_config
        from medexp.config import compose

        cfg = compose(overrides)
        benchmark = load_benchmark_from_config(cfg.bench, cfg.paths.cache_dir)
    except Exception as error:  # any failure becomes one readable line and a non-zero status
        print(f"medexp.inspect: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(summarize(benchmark, cfg.bench), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
