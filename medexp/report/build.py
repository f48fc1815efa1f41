"""Build the claims-to-evidence map from tracked runs and log it as a report run."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Sequence

from medexp.report.artefacts import derived_values, read_artefact_tables
from medexp.report.cells import CellIndex
from medexp.report.claims import Claim
from medexp.report.evaluate import ClaimResult, Outcome, evaluate_claims, status_counts
from medexp.report.external import write_external_tables
from medexp.report.figures import ReportFigure, draw_figures
from medexp.report.render import TITLE, ReportContext, latex_replicate_table, latex_table, report_blocks
from medexp.report.replicates import replicate_frame, replicate_rows

log = logging.getLogger("medexp")

STEM = "claims_to_evidence"
CELL_TABLES = ("cells.csv", "cells.parquet")
REPLICATE_TABLE = "replicates.csv"  # written when the experiment holds replicate cells
FIGURE_DIR = "figures"


@dataclass(frozen=True)
class ReportOutcome:
    output_dir: Path
    run_id: str
    results: tuple[ClaimResult, ...]
    files: tuple[str, ...]  # written under output_dir (and logged), relative paths

    @property
    def counts(self) -> dict[str, int]:
        return status_counts(self.results)

    def summary(self) -> str:
        counts = ", ".join(f"{word} {count}" for word, count in self.counts.items()) or "no claims"
        tables = [name for name in (*CELL_TABLES, REPLICATE_TABLE) if name in self.files]
        return "\n".join([
            f"claims-to-evidence map: {self.output_dir / f'{STEM}.md'} (also .html, .tex, {', '.join(tables)})",
            f"report run: {self.run_id}",
            f"statuses: {counts}",
        ])


def build_report(cfg, claims: Sequence[Claim]) -> ReportOutcome:
    """Read the experiment's cells, resolve ``claims``, write the report and log it as a run.

    ``cfg`` is a composed report config (conf/report.yaml): ``tracking``, ``paths.root``,
    ``output_dir``, ``figures``.
    """
    from medexp import __version__
    from medexp.tracking import Tracker

    tracker = Tracker(cfg.tracking, cfg.paths.root)
    runs = tracker.search_cells()
    if not runs:
        log.warning("experiment %r of %s holds no cell runs (check tracking.experiment and tracking.uri); "
                    "every claim will be not run", cfg.tracking.experiment, tracker.uri)
    tables = read_artefact_tables(tracker, CellIndex.from_runs(runs).finished)
    index = CellIndex.from_runs(runs, derived_values(tables))
    log.info("report: %d cells with a finished run, %d without, in experiment %r of %s",
             len(index.finished), len(index.unfinished), cfg.tracking.experiment, tracker.uri)
    results = tuple(evaluate_claims(claims, index))
    figures = draw_figures(index, tables) if cfg.figures else []
    log.info("report: %d claims resolved, %d figures drawn", len(results), len(figures))
    output_dir = Path(cfg.output_dir).resolve()
    created = datetime.now().isoformat(timespec="seconds")
    params = {"output_dir": str(output_dir), "claims": ",".join(claim.id for claim in claims),
              "n_cells_finished": len(index.finished), "n_cells_unfinished": len(index.unfinished)}
    run_id = tracker.start(f"report {created}", {"medexp.kind": "report", "medexp.version": __version__}, params)
    try:
        context = ReportContext(str(cfg.tracking.experiment), tracker.uri, run_id, created)
        files = write_report(output_dir, results, index, figures, context)
        files += write_external_tables(cfg.get("external_tables") or [], tracker, index.finished, output_dir)
        tracker.log_files(run_id, {name: (output_dir / name).read_bytes() for name in files})
        tracker.log_metrics(run_id, report_metrics(results))
        tracker.finish(run_id)
    except BaseException as error:
        tracker.fail(run_id, error)  # a report that did not finish is never left RUNNING
        raise
    return ReportOutcome(output_dir, run_id, results, tuple(files))


def write_report(output_dir: Path, results: Sequence[ClaimResult], index: CellIndex,
                 figures: Sequence[ReportFigure], context: ReportContext) -> list[str]:
    """Write figures, the cells tables and the map (md, html, tex); returns the relative paths."""
    from medexp.kernel.atomic import atomic_path, atomic_write_bytes, atomic_write_parquet
    from medexp.report.document import to_html, to_markdown

    written = []
    figure_paths = {}
    for figure in figures:
        relative = f"{FIGURE_DIR}/{figure.name}.png"
        with atomic_path(output_dir / relative) as tmp:
            figure.figure.savefig(tmp, dpi=120, format="png")
        figure_paths[figure.name] = relative
        written.append(relative)
    cells = index.frame()
    with atomic_path(output_dir / CELL_TABLES[0]) as tmp:
        cells.to_csv(tmp, index=False)
    atomic_write_parquet(cells, output_dir / CELL_TABLES[1])
    written += CELL_TABLES
    replicates = replicate_rows(index)
    if replicates:
        with atomic_path(output_dir / REPLICATE_TABLE) as tmp:
            replicate_frame(replicates).to_csv(tmp, index=False)
        written.append(REPLICATE_TABLE)
    blocks = report_blocks(results, index, figures, context, figure_paths, CELL_TABLES, replicates,
                           REPLICATE_TABLE if replicates else "")
    documents = {
        f"{STEM}.md": to_markdown(blocks),
        f"{STEM}.html": to_html(blocks, TITLE, output_dir),
        f"{STEM}.tex": latex_table(results, context) + latex_replicate_table(replicates, context),
    }
    for name, text in documents.items():
        atomic_write_bytes(output_dir / name, text.encode("utf-8"))
        written.append(name)
    return written


def report_metrics(results: Sequence[ClaimResult]) -> dict[str, float]:
    """``claims_<status word>`` per word printed, ``outcome_<outcome>`` per :class:`Outcome` and ``n_claims``."""
    metrics = {"n_claims": float(len(results))}
    for word, count in status_counts(results).items():
        metrics[f"claims_{_metric_name(word)}"] = float(count)
    for outcome in Outcome:
        metrics[f"outcome_{_metric_name(outcome.value)}"] = float(sum(r.outcome is outcome for r in results))
    return metrics


def _metric_name(word: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", word.lower()).strip("_") or "status"


def run_from_hydra(cfg) -> ReportOutcome:
    """Entry of ``python -m medexp.report``: load the claims, build the report, print the summary."""
    import os
    import sys

    # one bar over the artefact tables instead of MLflow's bar per downloaded file
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

    from medexp.report.claims import ClaimError, load_claims
    from medexp.tracking import ui_command

    try:
        claims = load_claims(None if cfg.claim_ids is None else list(cfg.claim_ids))
    except ClaimError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    outcome = build_report(cfg, claims)
    print(outcome.summary())
    print(f"view it: {ui_command(cfg.tracking, cfg.paths.root)}")
    return outcome
