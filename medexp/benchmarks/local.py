"""The generic ``local`` format: ``<root>/<split>.jsonl`` with image paths relative to root.

Each line holds ``id``, ``question``, ``answer``, optional ``image`` and ``options``; every other
key goes to ``meta``. A new benchmark in this format needs only a YAML file in conf/bench/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.records import SourceRow, assemble, json_type, jsonl_records, required_text, split_file

_RESERVED = ("id", "question", "answer", "image", "options")


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load a ``format: local`` benchmark from ``bench.root``."""
    if not bench_cfg.root:
        raise ValueError(f"bench={bench_cfg.name}: set bench.root=/path/to/{bench_cfg.name} (format local)")
    return load_local(bench_cfg.name, Path(bench_cfg.root).expanduser(), bench_cfg.split, bench_cfg.max_examples,
                      bench_cfg.allow_outside_root)


def load_demo(bench_cfg, cache_dir: Path) -> Benchmark:
    """The offline demo benchmark, generated into the cache on first use."""
    from medexp.demo.cache import demo_benchmark_root

    root = demo_benchmark_root(bench_cfg.demo, cache_dir)
    return load_local(bench_cfg.name, root, bench_cfg.split, bench_cfg.max_examples)


def load_local(
    name: str, root: Path, split: str, max_examples: int | None = None, allow_outside_root: bool = False,
    image_only: bool = False,
) -> Benchmark:
    """Read ``<root>/<split>.jsonl`` in file order (at most ``max_examples`` rows).

    ``image_only``: a reference image corpus, whose rows may leave question and answer empty
    (``""``, as the pmc_oa and image_set loaders give) but must have an image.
    """
    path = split_file(name, root, f"{split}.jsonl")
    return assemble(name, split, _rows(path, Path(root), image_only), max_examples, Path(root), allow_outside_root)


def _rows(path: Path, root: Path, image_only: bool = False) -> Iterator[SourceRow]:
    def text(record: dict, key: str, where: str) -> str:
        if image_only and record.get(key) == "" and record.get("image"):
            return ""
        return required_text(record, key, where)

    for where, record in jsonl_records(path):
        image = record.get("image")
        options = record.get("options")
        if options is not None and (not isinstance(options, list) or not options):
            raise ValueError(f"{where}: options must be a non-empty list, got a JSON {json_type(options)}")
        yield SourceRow(
            source_id=required_text(record, "id", where),
            question=text(record, "question", where),
            answer=text(record, "answer", where),
            image=root / str(image) if image else None,
            options=tuple(str(option) for option in options) if options else None,
            meta={key: value for key, value in record.items() if key not in _RESERVED},
            where=where,
        )
