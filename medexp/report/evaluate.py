"""Resolve claims against the tracked cells.

An evidence item selects cells (each combination of the names and glob patterns it lists is an
expected cell group; an axis given as "*" or as a pattern matches many names but its group needs
at least one run) and checks its condition on each selected cell (each settings of a key run more
than one way is a cell of its own, :mod:`medexp.report.cells`), combined by its quantifier
(:mod:`medexp.report.quantifiers`: all, any, sign_test, at least / at most K cells or a share F
of them). The item has no evidence when a group has no finished run, when a selected cell lacks
a value the condition reads (or holds NaN), or when the item states ``expect`` and the number of
finished cells it selects differs (the runs of those cells that did not finish are named). A
claim takes its ``holds`` word when every item holds, its ``fails`` word when all items have
evidence and one fails, and "no evidence" when any item lacks evidence. A claim none of whose
selected cells has a tracked run at all (finished or not) is "not run": nothing was tried, which
is not the same as cells that ran and left the rule without evidence.

A claim that names an ``effect`` adds "underpowered": a selected cell that is not significant
(``flag`` 0) and whose ``mde`` (its minimum detectable effect at power 0.8) exceeds the effect
could not have shown it, so its verdict is no evidence either way. An item is underpowered when
its outcome turns on such cells (counted as meeting the condition it holds, counted as not it
fails, or the reverse); a claim is underpowered when none of its items fails or lacks evidence
and one is underpowered, and its status names the largest MDE: "underpowered (MDE x > effect y)".

A claim that would hold is "confounded" instead when one of the cells it rests on failed its
distribution-shift control (``shift_confounded`` 1: a classifier on the inputs alone, no model,
tells the cell's members from its non-members, so a membership or Min-K%-type result there may
measure the shift, not memorisation). Its status names the largest shift AUC: "confounded
(inputs alone tell members from non-members: shift AUC x)". A claim that fails, lacks evidence
or is underpowered keeps that status.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Sequence

from medexp.report.cells import CellIndex, CellRun
from medexp.report.claims import ANY, AXES, CONFOUNDED, NO_EVIDENCE, NOT_RUN, UNDERPOWERED, Claim, Evidence
from medexp.report.conditions import percentile_key, percentile_ranks
from medexp.kernel.cell import Cell


class Outcome(str, Enum):
    holds = "holds"
    fails = "fails"
    no_evidence = NO_EVIDENCE
    underpowered = UNDERPOWERED
    confounded = CONFOUNDED
    not_run = NOT_RUN


@dataclass(frozen=True)
class CellCheck:
    """A selected cell, the values the condition read on it, and whether it met the condition."""

    cell: CellRun
    values: dict[str, float]
    met: bool
    underpowered: str | None = None  # "underpowered (MDE x > effect y)" when it could not show the claim's effect
    confounded: str | None = None  # "confounded (... shift AUC x)" when its inputs alone separate its groups


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
    ran: bool  # whether any cell it selects has a tracked run (finished or not)

    @property
    def met(self) -> int:
        """How many checked cells meet the condition."""
        return sum(check.met for check in self.checks)

    @property
    def weakest(self) -> CellCheck | None:
        """The underpowered cell with the largest MDE, if any."""
        weak = [check for check in self.checks if check.underpowered]
        return max(weak, key=lambda check: check.cell.values["mde"]) if weak else None

    @property
    def most_confounded(self) -> CellCheck | None:
        """The confounded cell with the largest shift AUC, if any."""
        confounded = [check for check in self.checks if check.confounded]
        return max(confounded, key=lambda check: check.cell.values.get("shift_auc", -math.inf)) if confounded else None


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    items: tuple[EvidenceResult, ...]
    outcome: Outcome

    @property
    def status(self) -> str:
        """The word the report prints: the claim's own words, "no evidence", "underpowered (MDE x >
        effect y)" or "confounded (inputs alone tell members from non-members: shift AUC x)"."""
        if self.outcome is Outcome.underpowered:
            weakest = [item.weakest for item in self.items if item.outcome is Outcome.underpowered]
            return max(weakest, key=lambda check: check.cell.values["mde"]).underpowered
        if self.outcome is Outcome.confounded:
            confounded = [item.most_confounded for item in self.items if item.outcome is Outcome.confounded]
            return max(confounded, key=lambda check: check.cell.values.get("shift_auc", -math.inf)).confounded
        words = {Outcome.holds: self.claim.holds, Outcome.fails: self.claim.fails, Outcome.not_run: NOT_RUN}
        return words.get(self.outcome, NO_EVIDENCE)


def evaluate_claims(claims: Sequence[Claim], index: CellIndex) -> list[ClaimResult]:
    return [evaluate_claim(claim, index) for claim in claims]


def evaluate_claim(claim: Claim, index: CellIndex) -> ClaimResult:
    items = tuple(evaluate_evidence(evidence, index, claim.effect) for evidence in claim.evidence)
    if not any(item.ran for item in items):
        return ClaimResult(claim, items, Outcome.not_run)
    outcomes = {item.outcome for item in items}
    # a decided failure outweighs an underpowered item: the claim cannot hold whatever more power shows
    for outcome in (Outcome.no_evidence, Outcome.fails, Outcome.underpowered, Outcome.confounded):
        if outcome in outcomes:
            return ClaimResult(claim, items, outcome)
    return ClaimResult(claim, items, Outcome.holds)


def underpowered(values, effect: float | None) -> str | None:
    """"underpowered (MDE x > effect y)" for a cell that is not significant and whose MDE exceeds
    ``effect``; None otherwise (no effect named, no mde logged, or a significant cell)."""
    mde, flag = values.get("mde", math.nan), values.get("flag", math.nan)
    if effect is None or not math.isfinite(mde) or flag != 0 or mde <= effect:
        return None
    return f"{UNDERPOWERED} (MDE {mde:.3g} > effect {effect:g})"


def confounded(values) -> str | None:
    """"confounded (inputs alone tell members from non-members: shift AUC x)" for a cell whose
    shift control rejected (``shift_confounded`` 1); None otherwise (no shift control logged)."""
    if values.get("shift_confounded", math.nan) != 1:
        return None
    return f"{CONFOUNDED} (inputs alone tell members from non-members: shift AUC {values.get('shift_auc', math.nan):.3g})"


def evaluate_evidence(evidence: Evidence, index: CellIndex, effect: float | None = None) -> EvidenceResult:
    missing: list[MissingCell] = []
    condition = evidence.condition
    seen: set[tuple[str, str | None]] = set()  # overlapping patterns select a cell (key and settings) once
    usable: list[tuple[CellRun, dict[str, float]]] = []
    ran = False
    for names in evidence.selection.combinations():
        cells = index.select(names)
        if not cells:
            attempts = tuple(index.unfinished_matching(names))
            ran = ran or bool(attempts)
            missing.append(MissingCell(_pattern(names), _no_run_reason(attempts), attempts))
            continue
        ran = True
        for cell in cells:
            if cell.identity in seen:
                continue
            seen.add(cell.identity)
            values = {name: cell.values.get(name, math.nan) for name in sorted(condition.names)}
            absent = [name for name, value in values.items() if not math.isfinite(value)]
            if absent:
                missing.append(MissingCell(cell.key, f"run {cell.run_id} has no value for {', '.join(absent)}"))
            else:
                usable.append((cell, values))
    if condition.ranked:
        # Ranks are among all the selected cells: with one of them unusable, none can be ranked.
        if not missing and len(usable) < 2:
            missing.append(MissingCell(evidence.selection.describe(), f"percentile() ranks cells against each "
                                       f"other: {len(usable)} selected cell(s), it needs at least two"))
        if missing:
            usable = []
        for name in sorted(condition.ranked) if usable else ():
            for (_, values), share in zip(usable, percentile_ranks([values[name] for _, values in usable])):
                values[percentile_key(name)] = share
    checks = [CellCheck(cell, values, condition.holds(values), underpowered(cell.values, effect),
                        confounded(cell.values)) for cell, values in usable]
    if evidence.expect is not None and len(seen) != evidence.expect:
        named = {attempt.run_id for entry in missing for attempt in entry.attempts}
        missing.append(_unexpected_count(evidence, index, len(seen), named))
    if missing:
        outcome = Outcome.no_evidence
    else:
        decided = sum(check.met for check in checks if not check.underpowered)
        weak = sum(bool(check.underpowered) for check in checks)
        # the outcome with every underpowered cell meeting the condition, and with none meeting it
        verdicts = {evidence.quantifier.holds(decided + weak, len(checks)),
                    evidence.quantifier.holds(decided, len(checks))}
        if len(verdicts) == 2:
            outcome = Outcome.underpowered
        else:
            outcome = Outcome.holds if verdicts.pop() else Outcome.fails
        if outcome is Outcome.holds and any(check.confounded for check in checks):
            outcome = Outcome.confounded
    return EvidenceResult(evidence, tuple(checks), tuple(missing), outcome, ran)


def _unexpected_count(evidence: Evidence, index: CellIndex, found: int, named: set[str]) -> MissingCell:
    """The selection's shortfall (or excess) against ``expect``, with the runs of selected cells that
    never finished (those not ``named`` already by a missing group)."""
    unfinished = {attempt.identity: attempt for names in evidence.selection.combinations()
                  for attempt in index.unfinished_matching(names)}
    attempts = tuple(attempt for attempt in unfinished.values() if attempt.run_id not in named)
    if found < evidence.expect:
        reason = f"{found} of the {evidence.expect} expected cells have a finished run"
        if unfinished:
            reason += f"; {len(unfinished)} selected cells never finished"
    else:
        reason = (f"{found} finished cells match, the claim expects {evidence.expect}: "
                  "narrow the selection or correct 'expect'")
    return MissingCell(evidence.selection.describe(), reason, attempts)


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
