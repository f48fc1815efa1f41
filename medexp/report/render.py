"""The claims-to-evidence map as a document (Markdown/HTML) and as a LaTeX table."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from medexp.report.artefacts import ALPHA_SWEEP_VALUES
from medexp.report.cells import CellIndex, CellRun
from medexp.report.document import Block, Bullets, Code, Heading, Image, Link, Paragraph, Status, Strong, Table
from medexp.report.dose_response import dose_curves, dose_labels
from medexp.report.claims import NOT_RUN, UNDERPOWERED
from medexp.report.evaluate import ClaimResult, EvidenceResult, Outcome, status_counts
from medexp.report.figures import ReportFigure
from medexp.report.replicates import CONFIDENCE, UNIT, Rate, ReplicateRow, seed_ranges

TITLE = "Claims-to-evidence map"
GAP_VALUES = ("mean_flagged", "mean_unflagged")  # the metrics of an overlap-gap cell the report tabulates
GLOSSARY = {
    "p_bonferroni": "Bonferroni-adjusted p-value, min(1, m p), over the cell's family (tag medexp.family: all "
                    "finished cells with a p-value sharing detector family and control)",
    "q_bh": "Benjamini-Hochberg q-value over the same family",
    "family_size": "m, the number of cells in that family",
    ALPHA_SWEEP_VALUES[0]: "image_nn: the largest flag-count p-value over the alpha sweep",
    ALPHA_SWEEP_VALUES[1]: "image_nn: the smallest flag rate over the alpha sweep",
    ALPHA_SWEEP_VALUES[2]: "image_nn: largest over smallest swept alpha",
}


@dataclass(frozen=True)
class ReportContext:
    experiment: str
    tracking_uri: str
    report_run_id: str
    created: str  # when the report was made (ISO format)


def report_blocks(results: Sequence[ClaimResult], index: CellIndex, figures: Sequence[ReportFigure],
                  context: ReportContext, figure_paths: dict[str, str], table_files: Sequence[str],
                  replicates: Sequence[ReplicateRow] = (), replicate_file: str = "") -> list[Block]:
    """The whole report: summary table, the claims not run, one section per claim that ran, the
    overlap gaps, replicates, figures, cells, glossary."""
    counts = status_counts(results)
    ran = [result for result in results if result.outcome is not Outcome.not_run]
    blocks: list[Block] = [
        Heading(1, TITLE),
        Paragraph(["Experiment ", Code(context.experiment), " in ", Code(context.tracking_uri),
                   (f": {len(index.finished)} cells with a finished run, {len(index.unfinished)} without; "
                    f"read {context.created}. Report run "), Code(context.report_run_id), "."]),
        Paragraph(["Statuses: ", *_joined([f"{word} {count}" for word, count in counts.items()])]),
    ]
    if ran:
        blocks.append(Table(["claim", "status", "source", "sentence"], [
            [[Link(result.claim.id, f"#{result.claim.id}")], [Status(result.status, result.outcome.value)],
             [result.claim.source], [result.claim.sentence]]
            for result in ran
        ]))
    blocks += _not_run_blocks([result for result in results if result.outcome is Outcome.not_run])
    if ran:
        blocks.append(Heading(2, "Claims"))
    for result in ran:
        blocks += _claim_blocks(result)
    blocks += _gap_blocks(index)
    blocks += _replicate_blocks(replicates, replicate_file)
    blocks += _dose_response_blocks(index, replicates)
    if figures:
        blocks.append(Heading(2, "Figures"))
        blocks += [Image(figure_paths[figure.name], figure.caption) for figure in figures]
    blocks += _cells_blocks(index, table_files)
    blocks += [Heading(2, "Values the report adds"),
               Bullets([[Code(name), f": {meaning}"] for name, meaning in GLOSSARY.items()])]
    return blocks


def _claim_blocks(result: ClaimResult) -> list[Block]:
    claim = result.claim
    facts = [["Status: ", Status(result.status, result.outcome.value), f" (rule: {claim.describe()})"]]
    if claim.source:
        facts.append([f"Source: {claim.source}"])
    if result.outcome is Outcome.confounded:
        facts.append([("Confounded: the claim's rule holds, but a selected cell failed its distribution-shift "
                       "control (shift_confounded 1: a classifier on the inputs alone, no model, tells its members "
                       "from its non-members), so what its attacks measure may be the shift, not memorisation.")])
    if claim.manual_review:
        facts.append([Strong("Manual review: "), claim.manual_review])
    blocks: list[Block] = [Heading(3, f"{claim.id}: {result.status}", anchor=claim.id),
                           Paragraph([claim.sentence]), Bullets(facts)]
    for item in result.items:
        blocks += _evidence_blocks(item)
    return blocks


def _not_run_blocks(results: Sequence[ClaimResult]) -> list[Block]:
    """The claims none of whose cells has a run: listed apart, one line each, with the cells they select."""
    if not results:
        return []
    return [
        Heading(2, "Not run"),
        Paragraph([("Claims none of whose selected cells has a tracked run, finished or not: nothing was tried, "
                    "so they are neither evidence nor its absence (a claim whose cells ran without the values "
                    "its rule reads is \"no evidence\" above). Run the cells they select, then the report again.")]),
        Bullets([[Strong(result.claim.id), f" ({NOT_RUN}): {result.claim.sentence} Cells: ",
                  *_joined([Code(item.evidence.selection.describe()) for item in result.items]), "."]
                 for result in results]),
    ]


def _gap_blocks(index: CellIndex) -> list[Block]:
    """Per finished gap cell (its metrics hold the flagged and unflagged means): the mean score or
    accuracy on the flagged and the unflagged items with their counts, the gap, the baseline's
    difference and what the cell could detect."""
    cells = [cell for cell in index.finished if all(name in cell.values for name in GAP_VALUES)]
    if not cells:
        return []
    rows = []
    for cell in cells:
        values = cell.values
        rows.append([
            [Code(cell.model)], [cell.bench], [Code(cell.detector), *_variant_note(cell)], [cell.control],
            [cell.params.get("detector.score", "accuracy")],
            [_subset(values["mean_flagged"], values["n_flagged"], values["n_flagged_images"])],
            [_subset(values["mean_unflagged"], values["n_examples"] - values["n_flagged"],
                     values["n_images"] - values["n_flagged_images"])],
            [_interval(values, "gap")], [_number(values.get("p_value", math.nan))],
            [_interval(values, "gap_minus_baseline") + (
                f", p {_number(values['gap_minus_baseline_p_value'])}" if "gap_minus_baseline_p_value" in values
                else "")],
            [_power(values)],
        ])
    return [
        Heading(2, "Flagged and unflagged items"),
        Paragraph([("Each overlap-gap cell: the mean (score, or accuracy for a model that answers) on the items "
                    "whose image its flag source flagged and on the others, with their counts; the gap with its "
                    "interval over resampled images and its image-permutation p-value; the gap minus the baseline "
                    "model's; and the MDE (Cohen's d of the image means at power 0.8, and about that much in the "
                    "compared unit): an underpowered cell could not have seen a sizeable gap, so no gap there "
                    "is not evidence of none.")]),
        Table(["model", "bench", "detector", "control", "measure", "flagged: mean (questions, images)",
               "unflagged: mean (questions, images)", "gap [CI]", "p", "gap minus baseline's [CI]", "MDE"], rows),
    ]


def _variant_note(cell) -> list:
    """What sets a cell apart from the runs of its key with other settings ("" when it has none)."""
    differences = cell.describe_differences()
    return [f" ({differences})"] if differences else []


def _subset(mean: float, questions: float, images: float) -> str:
    return f"{_number(mean)} ({questions:.0f}, {images:.0f})"


def _interval(values, name: str) -> str:
    if name not in values:
        return ""
    return (f"{_number(values[name])} [{_number(values.get(f'{name}_ci_low', math.nan))}, "
            f"{_number(values.get(f'{name}_ci_high', math.nan))}]")


def _power(values) -> str:
    mde = values.get("mde", math.nan)
    text = f"d {mde:.2f} (~{_number(values.get('mde_gap', math.nan), 3)})" if math.isfinite(mde) else "none"
    return f"{text}; {UNDERPOWERED}" if values.get("underpowered") == 1 else text


def _evidence_blocks(item: EvidenceResult) -> list[Block]:
    evidence = item.evidence
    blocks: list[Block] = [
        Heading(4, f"evidence {evidence.name}: {_outcome_text(item)}"),
        Paragraph(["Rule: ", *_rule_text(item)]),
    ]
    if item.checks:
        blocks.append(Paragraph([f"Count: {_count_text(item)} ", Code(evidence.condition.text), "."]))
        names = sorted(evidence.condition.names)
        blocks.append(Table(["cell", "run", *names, "meets the rule"], [
            [[Code(check.cell.key), *_variant_note(check.cell)], [Code(check.cell.run_id)], *([_number(check.values[name])] for name in names),
             ["yes" if check.met else "no", *(f"; {note}" for note in (check.underpowered, check.confounded) if note)]]
            for check in item.checks
        ]))
    if item.missing:
        lines = []
        for missing in item.missing:
            line = [Code(missing.cell_key), f": {missing.reason}"]
            for attempt in missing.attempts:
                line += ["; run ", Code(attempt.run_id), f" {attempt.status}"]
                if attempt.error:
                    line.append(f": {attempt.error}")
            lines.append(line)
        blocks += [Paragraph(["Missing evidence:"]), Bullets(lines)]
    return blocks


def _rule_text(item: EvidenceResult) -> list:
    evidence = item.evidence
    return [Code(evidence.condition.text),
            f" holds on {evidence.quantifier.describe(evidence.expect)} ({evidence.selection.describe()})."]


def _outcome_text(item: EvidenceResult) -> str:
    """The item's outcome; an underpowered one names its largest MDE against the claim's effect, a
    confounded one its largest shift AUC."""
    if item.outcome is Outcome.underpowered:
        return item.weakest.underpowered
    if item.outcome is Outcome.confounded:
        return item.most_confounded.confounded
    return item.outcome.value


def _count_text(item: EvidenceResult) -> str:
    """E.g. "9 of 10 cells meet"."""
    cells = len(item.checks)
    return f"{item.met} of {cells} cell{'' if cells == 1 else 's'} meet{'s' if cells == 1 else ''}"


def _replicate_blocks(rows: Sequence[ReplicateRow], table_file: str) -> list[Block]:
    if not rows:
        return []
    level = f"{100 * CONFIDENCE:g}%"
    return [
        Heading(2, "Replicates"),
        Paragraph([
            (f"Flag rates over replicates. Resampling unit: one replicate is {UNIT}; the benchmark, the "
             "cohort and the detector settings are the same in every replicate. Clean rows (dose 0) are the "
             "false-positive rate of the whole pipeline, training included; leaky rows its power at that "
             "dose (leak epochs). flagged: the detector's own flag; significant: p_bonferroni below the "
             f"detector's alpha, corrected over the cell's family. Each rate with its Wilson {level} interval"),
            *(["; also in ", Link(table_file, table_file)] if table_file else []), ".",
        ]),
        Table(["bench", "detector", "control", "models", "role", "dose", "replicates (seeds)", "flagged",
               "alpha", "significant"], [
            [[row.bench], [Code(row.detector)], [row.control], [Code(row.models)], [row.role],
             [_number(row.dose, digits=0)], [f"{row.flagged.n} ({seed_ranges(row.seeds)})"], [_rate(row.flagged)],
             ["" if row.alpha is None else f"{row.alpha:g}"], ["" if row.significant is None else _rate(row.significant)]]
            for row in rows
        ]),
    ]


def _dose_response_blocks(index: CellIndex, rows: Sequence[ReplicateRow]) -> list[Block]:
    """The atlas table: one row per detector (recipe and control), one column per leak dose."""
    curves = dose_curves(index, rows)
    if not curves:
        return []
    doses = dose_labels(curves)
    by_dose = [{point.dose: point for point in curve.points} for curve in curves]
    return [
        Heading(2, "Dose response"),
        Paragraph([(f"Share of replicates flagged (the detector's own flag) at each leak dose, with its Wilson "
                    f"{100 * CONFIDENCE:g}% interval; dose 0 is the false-positive rate. One replicate is {UNIT}.")]),
        Table(["bench", "detector", "control", "recipe", *(f"dose {dose:g}" for dose in doses)], [
            [[curve.bench], [Code(curve.detector)], [curve.control], [Code(curve.recipe)],
             *([_rate(points[dose].flagged) if dose in points else ""] for dose in doses)]
            for curve, points in zip(curves, by_dose)
        ]),
    ]


def _rate(rate: Rate) -> str:
    """E.g. "9/10 = 0.90 [0.60, 0.98]"."""
    return f"{rate.count}/{rate.n} = {rate.rate:.2f} [{rate.low:.2f}, {rate.high:.2f}]"


def _cells_blocks(index: CellIndex, table_files: Sequence[str]) -> list[Block]:
    rows = []
    for cell in (*index.finished, *index.unfinished):
        values = cell.values
        rows.append([[Code(cell.key)], [Code(cell.settings) if cell.settings else ""], [cell.describe_differences()],
                     [cell.family or ""], [cell.status], [Code(cell.run_id)],
                     *([_number(values.get(name, math.nan))] for name in ("p_value", "p_bonferroni", "q_bh")),
                     [_number(values.get("family_size", math.nan), digits=0)], [_verdicts(cell)]])
    return [
        Heading(2, "Cells"),
        Paragraph([("The latest finished run of each cell key and settings (and the latest run of those that "
                    "never finished). A key run with other settings (the config beyond its four names that can "
                    "change its result, digest in the settings column) has a row per settings, side by side, "
                    "naming the values that differ; also in "), *_joined([Link(name, name) for name in table_files]),
                   "."]),
        Table(["cell", "settings", "differs", "family", "status", "run", "p_value", "p_bonferroni", "q_bh",
               "family_size", "verdicts (correct / wrong / no answer / error)"], rows),
    ]


def _verdicts(cell: CellRun) -> str:
    """E.g. "judge=read: 310 / 90 / 45 / 6"; empty for a cell that judged no replies."""
    counts = cell.verdict_counts()
    if all(math.isnan(count) for count in counts.values()):
        return ""
    numbers = " / ".join(_number(count, digits=0) or "?" for count in counts.values())
    return f"{cell.judge.split()[0]}: {numbers}" if cell.judge else numbers


def _number(value: float, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.0f}" if digits == 0 else f"{value:.{digits}g}"


def _joined(parts: Sequence) -> list:
    out: list = []
    for position, part in enumerate(parts):
        out += ([", "] if position else []) + [part]
    return out


# LaTeX --------------------------------------------------------------------------------------------

_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_LATEX_PATTERN = re.compile("|".join(re.escape(char) for char in _LATEX_SPECIAL))


def latex_table(results: Sequence[ClaimResult], context: ReportContext) -> str:
    """A ``table`` environment: claim, status, and the cells (with run ids) each status rests on."""
    rows = []
    for result in results:
        evidence = "; ".join(_latex_evidence(item) for item in result.items)
        rows.append(f"{_latex(result.claim.sentence)} & \\textbf{{{_latex(result.status)}}} & "
                    f"{{\\footnotesize {evidence}}} \\\\ \\hline")
    return "\n".join([
        (f"% Claims-to-evidence map generated by medexp.report from experiment {context.experiment} "
         f"({context.created}), report run {context.report_run_id}."),
        r"\begin{table}[t]",
        r"\centering\small",
        r"\begin{tabular}{p{0.42\linewidth}p{0.12\linewidth}p{0.38\linewidth}}",
        r"\hline",
        r"Claim & Status & Evidence cells \\ \hline",
        *rows,
        r"\end{tabular}",
        r"\caption{Claims, their status resolved from tracked runs, and the cells (run ids) each rests on.}",
        r"\label{tab:claims-to-evidence}",
        r"\end{table}",
        "",
    ])


def latex_replicate_table(rows: Sequence[ReplicateRow], context: ReportContext) -> str:
    """A ``table`` environment of the replicate table ("" without replicates)."""
    if not rows:
        return ""
    body = []
    for row in rows:
        significant = "" if row.significant is None else _rate(row.significant)
        body.append(" & ".join(_latex(text) for text in (
            row.detector, row.control, row.models, _number(row.dose, digits=0), str(row.flagged.n),
            _rate(row.flagged), significant)) + r" \\")
    level = f"{100 * CONFIDENCE:g}"
    return "\n".join([
        (f"% Replicate table generated by medexp.report from experiment {context.experiment} "
         f"({context.created}), report run {context.report_run_id}."),
        r"\begin{table}[t]",
        r"\centering\small",
        r"\begin{tabular}{lllrrll}",
        r"\hline",
        r"Detector & Control & Models & Dose & $n$ & Flagged & Significant \\ \hline",
        *body,
        r"\hline",
        r"\end{tabular}",
        (f"\\caption{{Flag rates over replicates, each {_latex(UNIT)}, with Wilson {level}\\% intervals. Dose: leak "
         r"epochs (0: clean, the false-positive rate; otherwise the power). Flagged: the detector's flag; "
         r"significant: Bonferroni-adjusted $p$ below the detector's $\alpha$.}"),
        r"\label{tab:replicates}",
        r"\end{table}",
        "",
    ])


def _latex_evidence(item: EvidenceResult) -> str:
    cells = [f"{check.cell.model}/{check.cell.bench}/{check.cell.detector}/{check.cell.control} "
             f"({check.cell.run_id[:8]})" for check in item.checks]
    cells += [f"missing {missing.cell_key.replace(',', '/')}" for missing in item.missing]
    outcome = f"{_outcome_text(item)}; {_count_text(item)} the condition" if item.checks else _outcome_text(item)
    return f"\\emph{{{_latex(item.evidence.name)}}} ({_latex(outcome)}): {_latex(', '.join(cells))}"


def _latex(text: str) -> str:
    return _LATEX_PATTERN.sub(lambda match: _LATEX_SPECIAL[match.group(0)], str(text))
