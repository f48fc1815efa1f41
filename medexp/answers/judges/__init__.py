"""Judges: the stage between a model's replies and an answering detector's statistics (DESIGN.md,
"Answers and probes"). :data:`JUDGES` names each kind's declaration as ``"module:attr"`` (one
module per judge, :class:`~medexp.answers.judges.base.JudgeDeclaration`); :mod:`.stage` applies the
cell's judge to a response table and returns the judged table with its verdict counts."""

from __future__ import annotations

from medexp.answers.judges.base import JudgeDeclaration, Reading, Verdict
from medexp.kernel.registry import import_object

JUDGES = {
    "read": "medexp.answers.judges.read:JUDGE",
    "exact": "medexp.answers.judges.exact:JUDGE",
    "llava_med": "medexp.answers.judges.llava_med:JUDGE",
    "vlmevalkit": "medexp.answers.judges.vlmevalkit:JUDGE",
    "model": "medexp.answers.judges.model:JUDGE",
}


def judge_declaration(kind: str) -> JudgeDeclaration:
    """The judge of kind ``kind``; a ValueError naming the kinds otherwise."""
    kind = getattr(kind, "value", kind)  # a JudgeKind, or its value
    if kind not in JUDGES:
        raise ValueError(f"no judge of kind {kind!r}; judges: {sorted(JUDGES)}")
    return import_object(JUDGES[kind])


__all__ = ["JUDGES", "JudgeDeclaration", "Reading", "Verdict", "judge_declaration"]
