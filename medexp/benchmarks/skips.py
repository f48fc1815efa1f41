"""Bad rows: skipped, counted by reason and bounded, the same way for every loader.

A release is read as its authors publish it, flaws included (DESIGN.md, "Releases as
published"). A loader never refuses a whole file for one bad row: it reads every row it can and
marks what is wrong with each, and this module decides what the task at hand can use.

* A row whose **own** problem makes it useless to any task (its image is missing or does not
  decode, its id cannot be read, a repeated id) is skipped while loading
  (:func:`medexp.benchmarks.records.assemble`).
* A row with an unusable **field** (an empty answer, an option gap, an answer letter outside the
  options) is kept by the loader with that field's flaw recorded (``Benchmark.flaws``);
  :func:`requiring` then skips it only when the task needs that field. An image corpus needs no
  question, answer or options (:data:`IMAGE_TASK`); a question-answering task needs all three
  (:data:`QUESTION_TASK`, the default); a detector that scores the gold answer as free text needs
  no options (:data:`OPEN_TASK`).
* Every skipped row keeps its reason, ``"<kind>: <where>: <detail>"``, and its id or file
  position. Counts by kind become the metrics ``n_skipped.<kind>`` (:func:`skip_metrics`) of a
  run and of ``python -m medexp.inspect``.
* Above ``bench.max_skipped_share`` (default 1%) of the rows read, the split fails
  (:class:`TooManySkipped`) naming its files, the reasons and the first rows: a handful of bad
  rows is a flawed release, a large share is a wrong file, layout or split.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Iterable, Sequence

from medexp.benchmarks.base import Benchmark, SkippedExample

QUESTION, ANSWER, OPTIONS = "question", "answer", "options"
EXAMPLE_FIELDS = (QUESTION, ANSWER, OPTIONS)
QUESTION_TASK = frozenset(EXAMPLE_FIELDS)  # answering a question: every field (the default)
OPEN_TASK = frozenset({QUESTION, ANSWER})  # scoring the gold answer as free text: no options
IMAGE_TASK = frozenset()  # an image corpus: the image alone
DEFAULT_MAX_SKIPPED_SHARE = 0.01
SHOWN_ROWS = 5  # skipped rows named in a TooManySkipped message


def metric_name(text: str) -> str:
    """A reason as a metric name part: case-folded, words joined by ``_`` ("missing image" -> ``missing_image``)."""
    return "_".join(str(text).casefold().replace("-", " ").split())


def reason_metrics(name: str, reasons: Iterable[str]) -> dict[str, float]:
    """``<name>`` (how many reasons) and ``<name>.<kind>`` per kind of reason (the text before its first colon)."""
    kinds = Counter(str(reason).split(":", 1)[0] for reason in reasons)
    return {name: float(sum(kinds.values())),
            **{f"{name}.{metric_name(kind)}": float(count) for kind, count in kinds.items()}}


def skip_metrics(skipped: Sequence[SkippedExample], name: str = "n_skipped") -> dict[str, float]:
    """``<name>.<kind>`` for every kind of reason among ``skipped`` (the total is ``n_skipped_examples``)."""
    metrics = reason_metrics(name, [item.reason for item in skipped])
    del metrics[name]
    return metrics


def requiring(benchmark: Benchmark, needs: frozenset[str]) -> Benchmark:
    """``benchmark`` without the examples whose flawed fields the task ``needs``; they join its
    skipped rows (with the flaw's reason) and the others keep their released order, renumbered.

    A flawed field the task does not need stays as the loader left it (an empty answer is ``""``,
    options with a gap are None); the flaw stays recorded in ``flaws``.
    """
    unknown = set(needs) - set(EXAMPLE_FIELDS)
    if unknown:
        raise ValueError(f"unknown example field(s) {sorted(unknown)}; the fields a task may need are {list(EXAMPLE_FIELDS)}")
    dropped = {example_id: next(reason for field, reason in flaws.items() if field in needs)
               for example_id, flaws in benchmark.flaws.items() if set(flaws) & needs}
    if not dropped:
        return benchmark
    kept, skipped = [], list(benchmark.skipped)
    for example in benchmark.examples:
        if example.example_id in dropped:
            skipped.append(SkippedExample(example.example_id, dropped[example.example_id]))
        else:
            kept.append(dataclasses.replace(example, position=len(kept)) if example.position != len(kept) else example)
    flaws = {example_id: flaws for example_id, flaws in benchmark.flaws.items() if example_id not in dropped}
    return dataclasses.replace(benchmark, examples=kept, skipped=skipped, flaws=flaws)


class TooManySkipped(ValueError):
    """More of a split's rows were skipped than ``bench.max_skipped_share`` allows; ``benchmark``
    holds what was read, so a caller that reports (``medexp.inspect``) can still describe it."""

    def __init__(self, message: str, benchmark: Benchmark):
        super().__init__(message)
        self.benchmark = benchmark


def skipped_share(benchmark: Benchmark) -> float:
    """Skipped rows over rows read (examples plus skipped)."""
    total = len(benchmark.examples) + len(benchmark.skipped)
    return len(benchmark.skipped) / total if total else 0.0


def check_skipped_share(benchmark: Benchmark, split: str, limit: float) -> None:
    """Raise :class:`TooManySkipped` when more than ``limit`` of the rows read were skipped,
    naming the files read, the counts by reason and the first skipped rows."""
    share = skipped_share(benchmark)
    if share <= limit:
        return
    counts = Counter(item.kind for item in benchmark.skipped)
    first = "; ".join(f"{item.label} ({item.reason})" for item in benchmark.skipped[:SHOWN_ROWS])
    files = ", ".join(benchmark.files) or "(the loader names none)"
    total = len(benchmark.examples) + len(benchmark.skipped)
    raise TooManySkipped(
        f"bench={benchmark.name} split={split}: {len(benchmark.skipped)} of {total} rows skipped ({share:.1%}), "
        f"more than bench.max_skipped_share={limit:g}; files: {files}; reasons: {dict(counts.most_common())}; "
        f"first rows: {first}. Is this the right file, layout and split? If these rows are expected to be "
        "unusable, raise bench.max_skipped_share.",
        benchmark,
    )
