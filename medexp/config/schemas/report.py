"""Schemas of claims (conf/claims/) and of `python -m medexp.report` (conf/report.yaml)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

from omegaconf import MISSING

from medexp.config.schemas.root import TrackingConfig


@dataclass
class CellSelection:
    """Cells an evidence item reads: per axis a config name, a glob pattern ("demo_clean_s*",
    fnmatch syntax: * ? [..]), a list of names and patterns, or "*" (any)."""

    model: Any = "*"
    bench: Any = "*"
    detector: Any = "*"
    control: Any = "*"


@dataclass
class EvidenceConfig:
    name: str = MISSING  # short label of the item in the report
    select: CellSelection = field(default_factory=CellSelection)
    # Condition on each selected cell: its metrics, p_bonferroni, q_bh, family_size; numbers,
    # comparisons, arithmetic, and/or/not, abs(). E.g. "p_bonferroni < 0.05 and flag == 1".
    require: str = MISSING
    # How the condition combines over the selected cells (medexp.report.quantifiers): all, any,
    # sign_test, "at_least K", "at_most K", "fraction_at_least F", "fraction_at_most F".
    quantifier: str = "all"
    # How many finished cells the selection must match (e.g. 10 replicates); any other number is
    # "no evidence", so a half-finished sweep cannot satisfy "at_least 9" with 9 of 9. Required by
    # the counting quantifiers.
    expect: Optional[int] = None


@dataclass
class ClaimStatuses:
    holds: str = MISSING  # status when every evidence item holds (e.g. survives)
    fails: str = MISSING  # status when one does not (e.g. collapses)


@dataclass
class ClaimConfig:
    """One claim of the claims-to-evidence map (conf/claims/<id>.yaml)."""

    id: str = MISSING  # equal to the file name
    sentence: str = MISSING
    source: str = ""  # where the claim is established, e.g. "§4.1, §4.7"
    evidence: List[EvidenceConfig] = MISSING
    statuses: ClaimStatuses = MISSING
    manual_review: Optional[str] = None  # the part a person must check; the rule checks the rest
    # The effect the claim is about, in the unit of the selected cells' ``mde`` metric (accuracy
    # points as a fraction for the answering detectors: 0.05 = 5 points). A selected cell that is
    # not significant (flag 0) and whose mde exceeds it could not have shown the effect: the
    # report calls its evidence "underpowered (MDE x > effect y)".
    effect: Optional[float] = None


@dataclass
class ReportPathsConfig:
    root: str = MISSING  # project root: anchors mlruns/ and the default output folder


@dataclass
class ExternalTableConfig:
    """A per-item table another tool published (a top-K list ...), joined to the cells of a
    benchmark through its ``external_ids`` (medexp.report.external)."""

    path: str = MISSING  # a JSON list of objects, JSON lines, CSV, TSV or parquet
    bench: str = MISSING  # the bench config (conf/bench/<bench>.yaml) whose items it names
    id_column: str = "example_id"  # the column holding the other tool's item ids
    name: Optional[str] = None  # the output file external/<name>.csv (None: the table's file stem)


@dataclass
class ReportConfig:
    """``python -m medexp.report`` (conf/report.yaml)."""

    paths: ReportPathsConfig = field(default_factory=ReportPathsConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    output_dir: str = MISSING
    claim_ids: Optional[List[str]] = None  # None: every file of the claims group in the search path
    figures: bool = True
    external_tables: List[ExternalTableConfig] = field(default_factory=list)
