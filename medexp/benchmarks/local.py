"""The generic ``local`` format: ``<root>/<split>.jsonl`` with image paths relative to root.

Each line holds ``id``, ``question``, ``answer``, optional ``image`` and ``options``; every other
key goes to ``meta``. A new benchmark in this format needs only a YAML file in conf/bench/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.records import SourceRow, assemble, jsonl_records, require_fields, split_file

_REQUIRED = ("id", "question", "answer")
_RESERVED = ("id", "question", "answer", "image", "options")


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load a ``format: local`` benchmark from ``bench.root``."""
    if not bench_cfg.root:
        raise ValueError(f"bench={bench_cfg.name}: set bench.root=/path/to/{bench_cfg.name} (format local)")
    return load_local(bench_cfg.name, Path(bench_cfg.root).expanduser(), bench_cfg.split, bench_cfg.max_examples)


def load_demo(bench_cfg, cache_dir: Path) -> Benchmark:
    """The offline demo benchmark, generated into the cache on first use."""
    from medexp.demo.cache import demo_benchmark_root

    root = demo_benchmark_root(bench_cfg.demo, cache_dir)
    return load_local(bench_cfg.name, root, bench_cfg.split, bench_cfg.max_examples)


def load_local(name: str, root: Path, split: str, max_examples: int | None = None) -> Benchmark:
    """Read ``<root>/<split>.jsonl`` in file order (at most ``max_examples`` rows)."""
    path = split_file(name, root, f"{split}.jsonl")
    return assemble(name, split, _rows(path, Path(root)), max_examples)


def _rows(path: Path, root: Path) -> Iterator[SourceRow]:
    for where, record in jsonl_records(path):
        require_fields(record, _REQUIRED, where)
        yield SourceRow(
            source_id=record["id"],
            question=str(record["question"]),
            answer=str(record["answer"]),
            image=root / record["image"] if record.get("image") else None,
            options=tuple(record["options"]) if record.get("options") else None,
            meta={key: value for key, value in record.items() if key not in _RESERVED},
        )
