"""A list of probes with the probes that could not be made and why."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from medexp.probes.base import Probe


@dataclass
class ProbeSet:
    probes: list[Probe] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (probe id, "<kind of reason>: <detail>")

    def extend(self, other: "ProbeSet") -> None:
        self.probes.extend(other.probes)
        self.skipped.extend(other.skipped)

    def skip_counts(self) -> dict[str, int]:
        """How many probes were skipped for each kind of reason (the text before the first colon)."""
        return dict(Counter(reason.split(":", 1)[0] for _, reason in self.skipped))
