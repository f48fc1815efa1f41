"""Ordered benchmark records. The released order is sacred: nothing here sorts or shuffles."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional


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
    example_id: str
    reason: str  # "<kind>: <detail>", e.g. "corrupt image: /data/x.png: truncated file"

    @property
    def kind(self) -> str:
        """The reason without its details, for counting (e.g. "corrupt image")."""
        return self.reason.split(":", 1)[0]


@dataclass
class Benchmark:
    """A named, ordered list of examples plus what was skipped while loading it."""

    name: str
    examples: list[Example]
    skipped: list[SkippedExample] = field(default_factory=list)
    # The upstream layout the loader read (e.g. "vqa_rad_osf" or "hf_parquet" for VQA-RAD's two
    # releases), so a report can say which copy it audited.
    layout: Optional[str] = None

    def __post_init__(self) -> None:
        if not self.examples:
            raise ValueError(f"benchmark {self.name!r} has no examples (skipped: {len(self.skipped)})")
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
