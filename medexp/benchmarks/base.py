"""Ordered benchmark records. The released order is sacred: nothing here sorts or shuffles."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

# Example.meta key of the item's id in its release, as the release writes it (SLAKE's and VQA-RAD's
# qid, MMStar's index, a row index): what other tools' records name the item by (DESIGN.md,
# "Releases as published"); never parsed back out of the example id.
UPSTREAM_ID = "upstream_id"


@dataclass(frozen=True)
class Example:
    example_id: str  # stable across releases, e.g. "slake_en::test::11934"
    position: int  # index in the released order
    image: Optional[Path]  # None for text-only examples
    question: str
    answer: str
    options: Optional[tuple[str, ...]] = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SkippedExample:
    example_id: Optional[str]  # None when the row's own id could not be read
    reason: str  # "<kind>: <detail>", e.g. "corrupt image: /data/x.png: truncated file"
    where: Optional[str] = None  # the row's place in its file ("<file>:<line>", "<file>[<index>]")

    @property
    def kind(self) -> str:
        """The reason without its details, for counting (e.g. "corrupt image")."""
        return self.reason.split(":", 1)[0]

    @property
    def label(self) -> str:
        """The row as a message names it: its example id, else its place in the file."""
        return self.example_id or self.where or "a row without id"


@dataclass
class Benchmark:
    """A named, ordered list of examples plus what was skipped while loading it."""

    name: str
    examples: list[Example]
    skipped: list[SkippedExample] = field(default_factory=list)
    # The upstream layout the loader read (e.g. "vqa_rad_osf" or "hf_parquet" for VQA-RAD's two
    # releases), so a report can say which copy it audited.
    layout: Optional[str] = None
    # The data files the loader read (question files, shards; not the images), in reading order.
    files: list[str] = field(default_factory=list)
    # example id -> {field: "<kind>: <where>: <detail>"} for fields the loader could not read (an
    # empty answer, options with a gap); medexp.benchmarks.skips.requiring skips such an example
    # when the task needs the field.
    flaws: dict[str, dict[str, str]] = field(default_factory=dict)
    # Examples outside the benchmark's question selection (bench.languages ...), read because an
    # image corpus holds every image of the split: the images they alone bring are counted.
    outside_selection: frozenset[str] = frozenset()
    # Rows removed by bench.dedup (a repeated (image, question, answer) triple), with the row they repeat.
    removed_duplicates: list[SkippedExample] = field(default_factory=list)
    # Read from its annotations alone (no image looked for), for a cell that reads no pixels.
    annotations_only: bool = False

    def __post_init__(self) -> None:
        if not self.examples:
            kinds = Counter(item.kind for item in self.skipped)
            first = f"; first: {self.skipped[0].label} ({self.skipped[0].reason})" if self.skipped else ""
            raise ValueError(f"benchmark {self.name!r} has no examples (skipped: {len(self.skipped)} "
                             f"{dict(kinds.most_common())}{first})")
        seen: set[str] = set()
        for example in self.examples:
            if example.example_id in seen:
                raise ValueError(f"benchmark {self.name!r} has a duplicate example id {example.example_id!r}")
            seen.add(example.example_id)

    def __len__(self) -> int:
        return len(self.examples)

    def frame(self):
        """The examples as a pandas DataFrame: ids, position, text and the meta fields."""
        import pandas as pd

        fixed = ("example_id", "position", "question", "answer")
        rows = [
            {
                "example_id": ex.example_id,
                "position": ex.position,
                "question": ex.question,
                "answer": ex.answer,
                # A source field named like a fixed column keeps its value under meta_<name>.
                **{(f"meta_{key}" if key in fixed else key): value for key, value in ex.meta.items()},
            }
            for ex in self.examples
        ]
        return pd.DataFrame(rows)
