"""Resolve claims against the tracked cells.

An evidence item selects cells (each combination of the names it lists is an expected cell
group; an axis given as "*" matches any name but its group needs at least one run) and checks
its condition on each selected cell, combined with ``all``, ``any`` or ``sign_test`` (more cells
meet it than chance: a one-sided exact sign test at p < 0.05). The item has no evidence
when a group has no finished run or a selected cell lacks a value the condition reads (or holds
NaN). A claim takes its ``holds`` word when every item holds, its ``fails`` word when all items
have evidence and one fails, and "no evidence" when any item lacks evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Sequence

from medexp.report.cells import CellIndex, CellRun
from medexp.report.claims import ANY, AXES, NO_EVIDENCE, Claim, Evidence
from medexp.runner.cell import Cell


class Outcome(str, Enum):
    holds = "holds"
    fails = "fails"
    no_evidence = NO_EVIDENCE


@dataclass(frozen=True)
class CellCheck:
    """A selected cell, the values the condition read on it, and whether it met the condition."""

    cell: CellRun
    values: dict[str, float]
    met: bool


@dataclass(frozen=True)
class MissingCell:
    """A selected cell (or group, "*" for any name) without usable evidence, and why."""

    cell_key: str
    reason: str
    attempts: tuple[CellRun, ...] = ()  # runs of it that did not finish (FAILED with an error, RUNNING, ...)


@dataclass(frozen=True)
class EvidenceResult:
    evidence: Evidence
    checks: tuple[CellCheck, ...]
    missing: tuple[MissingCell, ...]
    outcome: Outcome


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    items: tuple[EvidenceResult, ...]
    outcome: Outcome

    @property
    def status(self) -> str:
        """The word the report prints: the claim's own words, or "no evidence"."""
        return {Outcome.holds: self.claim.holds, Outcome.fails: self.claim.fails}.get(self.outcome, NO_EVIDENCE)


def evaluate_claims(claims: Sequence[Claim], index: CellIndex) -> list[ClaimResult]:
    return [evaluate_claim(claim, index) for claim in claims]


def evaluate_claim(claim: Claim, index: CellIndex) -> ClaimResult:
    items = tuple(evaluate_evidence(evidence, index) for evidence in claim.evidence)
    outcomes = {item.outcome for item in items}
    if Outcome.no_evidence in outcomes:
        outcome = Outcome.no_evidence
    else:
        outcome = Outcome.fails if Outcome.fails in outcomes else Outcome.holds
    return ClaimResult(claim, items, outcome)


def evaluate_evidence(evidence: Evidence, index: CellIndex) -> EvidenceResult:
    checks: list[CellCheck] = []
    missing: list[MissingCell] = []
    condition = evidence.condition
    for names in evidence.selection.combinations():
        cells = index.select(names)
        if not cells:
            attempts = tuple(index.unfinished_matching(names))
            missing.append(MissingCell(_pattern(names), _no_run_reason(attempts), attempts))
            continue
        for cell in cells:
            values = {name: cell.values.get(name, math.nan) for name in sorted(condition.names)}
            absent = [name for name, value in values.items() if not math.isfinite(value)]
            if absent:
                missing.append(MissingCell(cell.key, f"run {cell.run_id} has no value for {', '.join(absent)}"))
            else:
                checks.append(CellCheck(cell, values, condition.holds(values)))
    if missing:
        outcome = Outcome.no_evidence
    elif evidence.quantifier == "sign_test":
        met = sum(check.met for check in checks)
        outcome = Outcome.holds if sign_test_p(met, len(checks)) < SIGN_TEST_LEVEL else Outcome.fails
    else:
        combine = all if evidence.quantifier == "all" else any
        outcome = Outcome.holds if combine(check.met for check in checks) else Outcome.fails
    return EvidenceResult(evidence, tuple(checks), tuple(missing), outcome)


SIGN_TEST_LEVEL = 0.05


def sign_test_p(met: int, cells: int) -> float:
    """One-sided exact sign test that more than half the cells meet a condition (1 for no cells)."""
    from scipy.stats import binomtest

    return float(binomtest(met, cells, 0.5, alternative="greater").pvalue) if cells else 1.0


def _pattern(names: dict[str, str]) -> str:
    """The cell key of a group, with "*" on the axes it leaves open."""
    return Cell(**{axis: names.get(axis, ANY) for axis in AXES}).key


def _no_run_reason(attempts: tuple[CellRun, ...]) -> str:
    if not attempts:
        return "no tracked run"
    statuses = sorted({attempt.status for attempt in attempts})
    return f"no FINISHED run (latest: {', '.join(statuses)})"


def status_counts(results: Sequence[ClaimResult]) -> dict[str, int]:
    """How many claims print each status word, in first-seen order."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    return counts
