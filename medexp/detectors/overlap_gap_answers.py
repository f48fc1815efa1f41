"""Detector ``overlap_gap_answers``: the accuracy advantage of examples on flagged images.

The answer-side twin of :mod:`medexp.detectors.overlap_gap`, for a model that answers rather than
scores (white box, an OpenAI-compatible server, a file of replies from another harness): every
example is asked once as released (``original`` probe), and the gap is the accuracy on the
questions whose image the flag source flagged minus the accuracy on the rest, the comparison of
contaminated and clean subsets that evaluation harnesses report, here with the image-resampling
interval, the image-permutation p-value, the strata (answer type), the baseline model's
difference and the MDE of :func:`medexp.detectors.overlap_gap.gap_result`.

Only answers count: an ``error`` row (the model could not be asked) is no answer and leaves the
gap (``n_unanswered``); a ``no_answer`` (a reply committing to nothing) counts as not correct. With a baseline, the items
both models answered.
"""

from __future__ import annotations

import pandas as pd

from medexp.answers.table import Status
from medexp.config.schemas import ControlKind, OverlapGapAnswersConfig
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import DetectorDeclaration, Input
from medexp.detectors.overlap_gap import GAP_POWER, gap_frame, gap_result

MEASURE = "accuracy"


def answered_outcomes(responses: pd.DataFrame) -> pd.DataFrame:
    """example_id and value (1.0 right, 0.0 wrong) of the answered rows of a response table."""
    answered = responses[responses["status"] != Status.error.value]
    repeated = answered["example_id"][answered["example_id"].duplicated()]
    if len(repeated):
        raise ValueError(f"overlap_gap_answers: one answer per example, but {repeated.iloc[0]!r} has several")
    return pd.DataFrame({"example_id": answered["example_id"], "value": answered["correct"].astype(float)})


def overlap_gap_answers_detector(responses: pd.DataFrame, flags: pd.DataFrame, examples: pd.DataFrame, cfg,
                                 seed: int, baseline: pd.DataFrame | None = None) -> DetectorResult:
    """``responses``: the cell model's response table (one probe per example); ``flags``:
    example_id, flagged; ``examples``: example_id, image and the strata columns; ``baseline``: a
    reference model's response table of the same probes (None: no difference is computed)."""
    outcomes = answered_outcomes(responses)
    frame = gap_frame(outcomes, flags, examples, None if baseline is None else answered_outcomes(baseline))
    result = gap_result(frame, cfg, seed, MEASURE)
    result.metrics["n_unanswered"] = float(len(responses) - len(outcomes))
    return result


DECLARATION = DetectorDeclaration(
    name="overlap_gap_answers",
    schema=OverlapGapAnswersConfig,
    evaluator="medexp.evaluators.overlap:overlap_gap_answers",
    inputs=frozenset({Input.answers, Input.flags}),
    controls=frozenset({ControlKind.none, ControlKind.order_hash, ControlKind.blind_image}),
    power=GAP_POWER,
    power_count="medexp.evaluators.overlap:flagged_images",
    docs="docs/images.md#the-overlap-gap-on-answers-overlap_gap_answers",
    probes="medexp.evaluators.overlap:answer_probe_set",
    control_reasons={
        ControlKind.external_baseline: "the model compared with is named in detector.baseline, asked the same probes",
        ControlKind.order_answer_len: "it orders by teacher-forced token counts, and the order plays no part in a gap",
        ControlKind.order_mink: "it orders by teacher-forced Min-K%++ scores, and the order plays no part in a gap",
    },
)
