"""How much of a probe set was answered, and the gate that keeps missing answers from becoming
evidence (DESIGN.md, "Answers and probes": errors are rows, counted and reported).

An ``error`` row is no answer: detectors compute on the answered rows only. A cell whose answered
share is below ``answer.min_answered`` has no verdict at all: :func:`require_answered` raises
:class:`TooFewAnswers`, which names the causes and their counts and carries the counts as
metrics, so the run ends FAILED with them and a rerun asks exactly the failed probes again.

Metrics (logged by every answering cell, from its judged table): ``n_probes``, ``n_answered`` (a
reply: an answer or a no-answer), ``n_errors`` and ``n_errors.<cause>`` for every other
:class:`~medexp.answers.table.ErrorCause`, and ``n_refused`` (refusals the API or the harness
recorded: no-answers, counted in the statistics, not errors).
"""

from __future__ import annotations

from collections import Counter

from medexp.answers.table import ErrorCause, Status


class TooFewAnswers(RuntimeError):
    """Fewer answered probes than ``answer.min_answered`` asks for: the cell has no verdict.
    ``metrics``: the answer counts, logged with the FAILED run."""

    def __init__(self, message: str, metrics: dict[str, float]):
        super().__init__(message)
        self.metrics = metrics


def answer_metrics(table, prefix: str = "") -> dict[str, float]:
    """``n_probes``, ``n_answered``, ``n_errors`` and ``n_errors.<cause>`` of a response table
    (each name after ``prefix``, e.g. ``reference.<model>.``)."""
    errors = table["status"] == Status.error.value
    causes = Counter(table.loc[errors, "error_cause"])
    metrics = {"n_probes": float(len(table)), "n_answered": float((~errors).sum()), "n_errors": float(errors.sum()),
               "n_refused": float(((table["status"] == Status.no_answer.value)
                                   & (table["error_cause"] == ErrorCause.refused.value)).sum())}
    metrics.update({f"n_errors.{cause.value}": float(causes.get(cause.value, 0)) for cause in ErrorCause
                    if cause is not ErrorCause.refused})
    return {f"{prefix}{name}": value for name, value in metrics.items()}


def error_summary(table) -> str:
    """The causes of a table's error rows with their counts, most frequent first, and the first message."""
    errors = table[table["status"] == Status.error.value]
    if errors.empty:
        return "no error"
    counts = errors["error_cause"].value_counts()
    return (", ".join(f"{cause} {count}" for cause, count in counts.items())
            + f" (first: {errors['error'].iloc[0]})")


def require_answered(table, min_answered: float, who: str) -> tuple[dict[str, float], list[str]]:
    """The answer metrics of ``who``'s response table and the warning its error rows call for;
    :class:`TooFewAnswers` when the answered share is below ``min_answered``."""
    metrics = answer_metrics(table)
    n, answered = int(metrics["n_probes"]), int(metrics["n_answered"])
    if n and answered / n < min_answered:
        raise TooFewAnswers(
            f"{who}: {answered} of {n} probes answered ({answered / n:.1%}), below answer.min_answered="
            f"{min_answered:g}: no verdict. No answer: {error_summary(table)}. Fix the cause and rerun the same "
            "command: only the probes without an answer are asked again", metrics)
    warnings = []
    if answered < n:
        warnings.append(f"{who}: {n - answered} of {n} probes got no answer ({error_summary(table)}); "
                        f"the detector used the {answered} answered probes only")
    return metrics, warnings
