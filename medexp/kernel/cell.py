"""A cell: one (model, bench, detector, control) combination and its derived seed."""

from __future__ import annotations

from dataclasses import dataclass

from medexp.kernel.hashing import derive_seed


@dataclass(frozen=True)
class Cell:
    model: str
    bench: str
    detector: str
    control: str

    @classmethod
    def from_config(cls, cfg) -> "Cell":
        return cls(cfg.model.name, cfg.bench.name, cfg.detector.name, cfg.control.name)

    @property
    def key(self) -> str:
        return f"model={self.model},bench={self.bench},detector={self.detector},control={self.control}"

    def seed(self, global_seed: int) -> int:
        """Seed of every random draw in the cell: the same whatever order a sweep runs cells in."""
        return derive_seed(global_seed, self.key)
