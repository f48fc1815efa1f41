"""The claims-to-evidence map, computed from tracked runs (``python -m medexp.report``).

Claims (``conf/claims/<id>.yaml``) select cells by model, benchmark, detector and control and
state a condition on their metrics; the report reads the latest finished run of every cell
key and settings (runs of one key with other settings side by side),
corrects p-values over each ``medexp.family`` (Bonferroni, Benjamini-Hochberg), resolves every
claim to its status word, "no evidence" or "not run" (none of its cells has a run), draws the
audit's figures from the runs, writes Markdown, HTML and a LaTeX table, and logs all of it as a
report run.
"""

from medexp.report.build import ReportOutcome, build_report
from medexp.report.cells import CellIndex, CellRun
from medexp.report.claims import NO_EVIDENCE, NOT_RUN, Claim, ClaimError, Evidence, Selection, claim_ids, load_claims
from medexp.report.conditions import Condition, ConditionError
from medexp.report.evaluate import ClaimResult, EvidenceResult, Outcome, evaluate_claim, evaluate_claims

__all__ = [
    "NO_EVIDENCE",
    "NOT_RUN",
    "CellIndex",
    "CellRun",
    "Claim",
    "ClaimError",
    "ClaimResult",
    "Condition",
    "ConditionError",
    "Evidence",
    "EvidenceResult",
    "Outcome",
    "ReportOutcome",
    "Selection",
    "build_report",
    "claim_ids",
    "evaluate_claim",
    "evaluate_claims",
    "load_claims",
]
