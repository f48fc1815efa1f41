"""The MedVIGIL detector: does a model notice when the evidence for an answer is broken?

Pure functions over a response table (:mod:`medexp.answers.table`) joined with probe facts
(:func:`probe_facts`): the case (``example_id``), the kind, the risk tier, the text-only
answerability flag and the option texts. Kinds use medexp's names; the release's ``tcf`` and
``halluc_trap`` are read as ``paraphrase`` and ``false_premise``.

:func:`evaluate_medvigil` is a cell's whole report: the metrics and their definitions are in
:mod:`medexp.detectors.medvigil_metrics`, the other tables in :mod:`medexp.detectors.medvigil_tables`,
the figures in :mod:`medexp.detectors.medvigil_figures`.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Optional

import pandas as pd

from medexp.answers.table import JUDGED_COLUMNS, Status, check_judged_table
from medexp.benchmarks.options import LETTERS, normalise
from medexp.config.schemas import MedvigilConfig
from medexp.config.tiers import TIERS
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.detectors.medvigil_metrics import CONVENTIONS, NO_IMAGE, TRAP, medvigil_intervals, sensitivity_table
from medexp.detectors.medvigil_tables import letter_preference, per_kind_table, sfr_tier_table, status_counts
from medexp.kernel.hashing import derive_seed
from medexp.stats.bootstrap import N_RESAMPLES
from medexp.stats.detector_power import ACCURACY_DIFFERENCE, PAIRED_ACCURACY, PowerFormula

KIND_ALIASES = {"tcf": "paraphrase", "halluc_trap": "false_premise"}
_BLUR = re.compile(r"^blur_(\d+(?:\.\d+)?)$")


def probe_facts(probes: Iterable) -> pd.DataFrame:
    """What the metrics need to know about each probe beyond the response table."""
    rows = []
    for probe in probes:
        rows.append({
            "probe_id": probe.probe_id,
            "risk_tier": probe.meta.get("risk_tier"),
            "text_only_answerable": probe.meta.get("text_only_answerable"),
            "options": tuple(probe.options) if probe.options is not None else None,
            "image": str(probe.image) if probe.image is not None else None,  # the inflation's resampling cluster
        })
    return pd.DataFrame(rows, columns=["probe_id", "risk_tier", "text_only_answerable", "options", "image"])


def scored_table(responses: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
    """The response table joined with the probe facts, one row per probe, in the table's order.

    Adds ``case`` (the example id), the canonical ``kind``, ``sigma`` (blur probes; inf for
    no_image) and ``answer`` (what a reply means: "gold", "refusal", the chosen option's text, or
    None without a choice).
    """
    check_judged_table(responses, responses["probe_id"])
    repeated = responses["probe_id"][responses["probe_id"].duplicated()]
    if len(repeated):
        raise ValueError(f"response table repeats probe ids, e.g. {repeated.iloc[0]!r}")
    facts = facts.drop_duplicates("probe_id")
    missing = sorted(set(responses["probe_id"]) - set(facts["probe_id"]))
    if missing:
        raise ValueError(f"{len(missing)} response row(s) have no probe facts, e.g. {missing[:3]}")
    table = responses[list(JUDGED_COLUMNS)].merge(facts, on="probe_id", how="left", validate="one_to_one")
    table["case"] = table["example_id"]
    table["kind"] = table["kind"].map(lambda kind: KIND_ALIASES.get(kind, kind))
    table["sigma"] = table["kind"].map(_sigma)
    table["answer"] = _answers(table)
    _check_tiers(table)
    return table


def _sigma(kind: str) -> float:
    if kind == NO_IMAGE:
        return math.inf
    match = _BLUR.match(kind)
    return float(match.group(1)) if match else math.nan


def _answers(table: pd.DataFrame) -> list[Optional[str]]:
    """What each reply means: "gold", "refusal", the chosen option's normalised text, or None."""
    out: list[Optional[str]] = []
    for status, choice, gold, refusal, options in zip(table["status"], table["choice"], table["gold"],
                                                       table["refusal"], table["options"]):
        if status != Status.ok.value or choice is None:
            out.append(None)
        elif choice == gold:
            out.append("gold")
        elif refusal is not None and choice == refusal:
            out.append("refusal")
        elif isinstance(options, tuple) and choice in LETTERS[:len(options)]:
            out.append(normalise(options[LETTERS.index(choice)]))
        else:
            out.append(f"letter {choice}")
    return out


def _check_tiers(table: pd.DataFrame) -> None:
    traps = table[table["kind"] == TRAP]
    tiers = traps["risk_tier"]
    if tiers.notna().any() and tiers.isna().any():
        raise ValueError(f"{int(tiers.isna().sum())} false-premise probe(s) have no risk tier while others do, "
                         f"e.g. {traps.loc[tiers.isna(), 'probe_id'].iloc[0]!r}: sfr_w needs every trap's tier")
    bad = sorted(set(tiers.dropna()) - set(TIERS))
    if bad:
        raise ValueError(f"unknown risk tier(s) {bad}; allowed: {list(TIERS)}")


def evaluate_medvigil(responses: pd.DataFrame, facts: pd.DataFrame, seed: int,
                      n_resamples: int = N_RESAMPLES, alpha: float = 0.01) -> dict[str, Any]:
    """Everything a ``medvigil`` cell reports: ``{"metrics": {...}, "tables": {...}}``.

    Metrics: every definition above as ``<name>_errors_wrong`` and ``<name>_errors_excluded``,
    with ``<name>_<convention>_ci_low`` / ``_ci_high`` (case-clustered bootstrap), plus
    ``n_examples`` (cases), ``n_probes`` and ``n_ok`` / ``n_no_answer`` / ``n_error``, and the
    released wording's inflation with its MDE at ``alpha`` (:func:`wording_inflation`).
    """
    table = scored_table(responses, facts)
    metrics: dict[str, float] = {"n_examples": float(table["case"].nunique()), "n_probes": float(len(table))}
    for status in Status:
        metrics[f"n_{status.value}"] = float((table["status"] == status.value).sum())
    intervals = []
    for convention in CONVENTIONS:
        frame = medvigil_intervals(table, seed, n_resamples, convention)
        intervals.append(frame)
        for row in frame.itertuples(index=False):
            metrics[f"{row.metric}_{convention}"] = row.estimate
            metrics[f"{row.metric}_{convention}_ci_low"] = row.ci_low
            metrics[f"{row.metric}_{convention}_ci_high"] = row.ci_high
    effect, effect_table = wording_inflation(table, alpha, seed, n_resamples)
    metrics.update(effect)
    tables = {
        "intervals": pd.concat(intervals, ignore_index=True),
        "per_kind": per_kind_table(table),
        "status_counts": status_counts(table),
        "sfr_by_tier": sfr_tier_table(metrics),
        "sensitivity": pd.concat([sensitivity_table(table, c).assign(convention=c) for c in CONVENTIONS],
                                 ignore_index=True),
        "letter_preference": letter_preference(table),
        "effect": effect_table,
        "per_probe": table.drop(columns=["options", "image"]),
    }
    return {"metrics": metrics, "tables": tables}


def wording_inflation(table: pd.DataFrame, alpha: float, seed: int,
                      n_resamples: int = N_RESAMPLES) -> tuple[dict[str, float], pd.DataFrame]:
    """What the released wording buys: ``inflation`` = accuracy on the cases' original probes minus
    accuracy on their paraphrases (the same question reworded, the gold kept), over the cases asked
    both, as a fraction (0.05 = 5 points; the cell's other metrics are percent), with its 95%
    interval resampling the original probes' images and ``mde``, the paired accuracy difference
    detectable at that many cases and ``alpha`` (two-sided, power 0.8).

    A case's original is its first original probe, its paraphrase outcome the mean over its
    paraphrases; error rows are no answer (a no-answer is wrong), so a case whose original or
    every paraphrase is an error leaves. Without a case asked both (a probe set without the
    paraphrase family) every value is NaN and no unit was resampled.
    """
    from medexp.detectors.answer_arms import effect_size

    answered = table[table["status"] != Status.error.value]
    originals = answered[answered["kind"] == "original"].drop_duplicates("case").set_index("case")
    paraphrased = answered[answered["kind"] == "paraphrase"].groupby("case")["correct"].mean()
    cases = [case for case in originals.index if case in paraphrased.index]
    if not cases:
        nan = float("nan")
        return ({"inflation": nan, "inflation_ci_low": nan, "inflation_ci_high": nan, "inflation_n_clusters": 0.0,
                 "mde": nan}, pd.DataFrame())
    first = originals.loc[cases, "correct"].astype(float).to_numpy()
    second = paraphrased.loc[cases].astype(float).to_numpy()
    images = [image if isinstance(image, str) else None for image in originals.loc[cases, "image"]]
    return effect_size(DECLARATION.power, first, second, images, alpha, derive_seed(seed, "medvigil", "inflation"), 0.95,
                       n_resamples)


DECLARATION = DetectorDeclaration(
    name="medvigil",
    schema=MedvigilConfig,
    evaluator="medexp.evaluators.medvigil:medvigil",
    probes="medexp.evaluators.medvigil:medvigil_probe_set",
    inputs=frozenset({Input.answers}),
    controls=SCORING_CONTROLS,
    power=PowerFormula(PAIRED_ACCURACY, "two", "cases", ACCURACY_DIFFERENCE,
                       "descriptive cell; the paired comparison of two models on the same cases (medvigil_compare's "
                       "within-case swap test)"),
    power_count="medexp.evaluators.power_counts:examples",
    docs="docs/medvigil.md#the-cell-detector-medvigil",
)
