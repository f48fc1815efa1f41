"""The generic ``local`` format: ``<root>/<split>.jsonl`` with image paths relative to root.

Each line holds ``id``, ``question``, ``answer``, optional ``image`` and ``options``; every other
key goes to ``meta``. A new benchmark in this format needs only a YAML file in conf/bench/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.records import (
    RowProblem, SourceRow, assemble, json_type, jsonl_records, problem_row, required_text, split_file, text_field,
)

_RESERVED = ("id", "question", "answer", "image", "options")


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load a ``format: local`` benchmark from ``bench.root``."""
    if not bench_cfg.root:
        raise ValueError(f"bench={bench_cfg.name}: set bench.root=/path/to/{bench_cfg.name} (format local)")
    return load_local(bench_cfg.name, Path(bench_cfg.root).expanduser(), bench_cfg.split, bench_cfg.max_examples,
                      bench_cfg.allow_outside_root)


def load_local(
    name: str, root: Path, split: str, max_examples: int | None = None, allow_outside_root: bool = False,
) -> Benchmark:
    """Read ``<root>/<split>.jsonl`` in file order (at most ``max_examples`` rows).

    A line without a usable id is skipped; an empty or missing question or answer, or options
    that are not a non-empty list, are flaws of the example (an image corpus, whose rows leave
    question and answer ``""``, needs neither; see :mod:`medexp.benchmarks.skips`).
    """
    path = split_file(name, root, f"{split}.jsonl")
    return assemble(name, split, _rows(path, Path(root)), max_examples, Path(root), allow_outside_root, [path])


def _rows(path: Path, root: Path) -> Iterator[SourceRow]:
    for where, record in jsonl_records(path):
        try:
            if isinstance(record, RowProblem):
                raise record
            source_id = required_text(record, "id", where)
        except RowProblem as problem:
            yield problem_row(problem, where)
            continue
        flaws: dict[str, str] = {}
        image = record.get("image")
        options = record.get("options")
        if options is not None and (not isinstance(options, list) or not options):
            flaws["options"] = (f"malformed options: {where}: options must be a non-empty list, "
                                f"got a JSON {json_type(options)}")
            options = None
        yield SourceRow(
            source_id=source_id,
            question=text_field(record, "question", where, flaws),
            answer=text_field(record, "answer", where, flaws),
            image=root / str(image) if image else None,
            options=tuple(str(option) for option in options) if options else None,
            meta={key: value for key, value in record.items() if key not in _RESERVED},
            where=where,
            flaws=flaws,
        )
