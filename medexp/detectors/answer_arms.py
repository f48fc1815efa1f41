"""What the MM-Detect detectors share: response tables joined with probe facts, two arms paired by
example, the paired statistics of the two arms, status counts, figures.

A *pair* is one example's probe in the first arm (``original``, ``slot_mask``) and its probe or
probes in the second arm (``option_shuffle`` variants, ``back_translation``, ``text_only``).
Only answers are evidence: an ``error`` row (the model could not be asked, the server failed)
is no answer, never a wrong one. A pair counts when its first-arm probe was answered and at least
one of its second-arm probes was; its unanswered second-arm probes leave it. A ``no_answer``
(the model replied and committed to nothing: a refusal, both options) counts as not correct. Pairs left out for want of an answer are
counted (``n_excluded_pairs``); the cell's answered share is gated before any detector runs
(:mod:`medexp.answers.coverage`).

Paired metrics over the pairs (n of them, V_i answered second-arm probes for example i, x_i the
first arm's outcome, y_i the mean of its second-arm outcomes):

* CR = mean x_i, PCR = mean y_i, Delta = PCR - CR;
* Phi = mean x_i (1 - y_i): right before and wrong after, over |D| = n (MM-Detect's instance
  leakage metric; with one variant, the count of such examples over n);
* b, c: (example, variant) pairs right-then-wrong and wrong-then-right;
* p: with one second-arm probe per example, the exact one-sided McNemar test (b against
  Binomial(b + c, 1/2): the first arm is right more often); with several, the within-example
  relabelling test of :func:`medexp.stats.paired.relabel_test` (exact by construction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from medexp.answers.table import JUDGED_COLUMNS, Status, check_judged_table
from medexp.benchmarks.skips import metric_name, reason_metrics
from medexp.probes.choice import EXAMPLE_META
from medexp.stats.bootstrap import N_RESAMPLES
from medexp.stats.inflation import paired_inflation
from medexp.stats.paired import mcnemar_exact, relabel_test, wilson_interval
from medexp.stats.detector_power import MDE_POWER, PowerFormula, detector_mde

MISSING_STRATUM = "(missing)"


def probe_facts(probes: Iterable, strata: Sequence[str] = ()) -> pd.DataFrame:
    """What the detectors need to know about each probe beyond its response row."""
    rows = []
    for probe in probes:
        meta = probe.meta.get(EXAMPLE_META, {})
        rows.append({
            "probe_id": probe.probe_id,
            "image": str(probe.image) if probe.image is not None else None,  # the inflation's resampling cluster
            "variant": probe.meta.get("variant"),
            "options": tuple(probe.options) if probe.options is not None else None,
            "n_options": probe.meta.get("n_options", len(probe.options) if probe.options is not None else None),
            "gold_text": probe.gold_text,
            "masked_word": probe.meta.get("masked_word"),
            **{f"stratum.{name}": _stratum(meta.get(name)) for name in strata},
        })
    columns = ["probe_id", "image", "variant", "options", "n_options", "gold_text", "masked_word",
               *(f"stratum.{name}" for name in strata)]
    return pd.DataFrame(rows, columns=columns)


def _stratum(value: Any) -> str:
    return MISSING_STRATUM if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def joined(responses: pd.DataFrame, facts: pd.DataFrame, kinds: Sequence[str]) -> pd.DataFrame:
    """The response rows of ``kinds`` with their probe facts, in the responses' order."""
    check_judged_table(responses, responses["probe_id"])
    repeated = responses["probe_id"][responses["probe_id"].duplicated()]
    if len(repeated):
        raise ValueError(f"response table repeats probe ids, e.g. {repeated.iloc[0]!r}")
    rows = responses[responses["kind"].isin(kinds)][list(JUDGED_COLUMNS)]
    facts = facts.drop_duplicates("probe_id")
    missing = sorted(set(rows["probe_id"]) - set(facts["probe_id"]))
    if missing:
        raise ValueError(f"{len(missing)} response row(s) have no probe facts, e.g. {missing[:3]}")
    table = rows.merge(facts, on="probe_id", how="left", validate="one_to_one")
    absent = [kind for kind in kinds if not (table["kind"] == kind).any()]
    if absent:
        raise ValueError(f"the response table has no {absent} probes (kinds present: "
                         f"{sorted(responses['kind'].unique())})")
    return table


def status_counts(table: pd.DataFrame, kind: str, name: str) -> dict[str, float]:
    """``n_error_<name>``, ``n_no_answer_<name>`` and ``n_ok_<name>`` over the rows of ``kind``."""
    statuses = table.loc[table["kind"] == kind, "status"]
    return {f"n_{status.value}_{name}": float((statuses == status.value).sum()) for status in Status}


@dataclass(frozen=True)
class Pairs:
    """Examples with an answered first arm and their answered second-arm outcomes."""

    example_ids: list[str]
    first: np.ndarray  # bool, one per example
    second: list[np.ndarray]  # bool arrays, one per example (its answered variants)
    excluded: int  # examples with both arms asked, left out for want of an answer

    @property
    def n(self) -> int:
        return len(self.example_ids)

    def second_means(self) -> np.ndarray:
        return np.array([values.mean() for values in self.second]) if self.second else np.zeros(0)


def pairs(table: pd.DataFrame, first_kind: str, second_kind: str) -> Pairs:
    """The examples whose two arms were both answered, in first-arm order."""
    first_rows = table[table["kind"] == first_kind].drop_duplicates("example_id")
    second_rows = table[table["kind"] == second_kind]
    asked = set(second_rows["example_id"])
    collected: dict[str, list[bool]] = {}
    answered_second = second_rows[second_rows["status"] != Status.error.value]
    for example, correct in zip(answered_second["example_id"], answered_second["correct"]):
        collected.setdefault(example, []).append(bool(correct))
    ids, first, second, excluded = [], [], [], 0
    for example, status, correct in zip(first_rows["example_id"], first_rows["status"], first_rows["correct"]):
        if example not in asked:
            continue
        if example not in collected or status == Status.error.value:
            excluded += 1
            continue
        ids.append(example)
        first.append(bool(correct))
        second.append(np.array(collected[example], dtype=bool))
    return Pairs(ids, np.array(first, dtype=bool), second, excluded)


def paired_statistics(pairs_: Pairs, n_permutations: int, seed: int, ci_level: float) -> dict[str, float]:
    """CR, PCR, Delta, Phi, b, c, the one-sided p and the Wilson intervals of CR and PCR."""
    nan = float("nan")
    if pairs_.n == 0:  # nothing to test: no p-value (never a p of 1 standing for "no evidence")
        return {"cr": nan, "pcr": nan, "delta": nan, "phi": nan, "b": 0.0, "c": 0.0, "p_value": nan,
                "n_pairs": 0.0, "cr_ci_low": nan, "cr_ci_high": nan, "pcr_ci_low": nan, "pcr_ci_high": nan}
    x = pairs_.first.astype(np.float64)
    y = pairs_.second_means()
    b = sum(int(np.sum(first & ~second)) for first, second in zip(pairs_.first, pairs_.second))
    c = sum(int(np.sum(~first & second)) for first, second in zip(pairs_.first, pairs_.second))
    if all(values.size == 1 for values in pairs_.second):
        p_value = mcnemar_exact(b, c, "greater").p_value
    else:
        p_value = relabel_test(pairs_.first, pairs_.second, n_permutations, seed).p_value
    cr = wilson_interval(int(x.sum()), pairs_.n, ci_level)
    # PCR's interval counts second-arm probes (several per example are correlated: too narrow then)
    right = int(sum(values.sum() for values in pairs_.second))
    total = int(sum(values.size for values in pairs_.second))
    pcr = wilson_interval(right, total, ci_level)
    return {"cr": float(x.mean()), "pcr": float(y.mean()), "delta": float(y.mean() - x.mean()),
            "phi": float(np.mean(x * (1.0 - y))), "b": float(b), "c": float(c), "p_value": float(p_value),
            "n_pairs": float(pairs_.n), "cr_ci_low": cr.low, "cr_ci_high": cr.high,
            "pcr_ci_low": pcr.low, "pcr_ci_high": pcr.high}


def example_images(table: pd.DataFrame, kind: str, example_ids: Sequence[str]) -> list[str | None]:
    """The image of each example's ``kind`` probe (None without one): the inflation's clusters."""
    images = table[table["kind"] == kind].drop_duplicates("example_id").set_index("example_id")["image"]
    return [images.get(example) for example in example_ids]


def effect_size(formula: PowerFormula, first: np.ndarray, second: np.ndarray, images: Sequence[str | None], alpha: float,
                seed: int, ci_level: float, n_resamples: int = N_RESAMPLES,
                chance: float | None = None) -> tuple[dict[str, float], pd.DataFrame]:
    """How large the effect is and how small one the cell could see: ``inflation`` = mean(first -
    second) with its bootstrap interval over the items' images (:func:`medexp.stats.inflation.paired_inflation`)
    and ``mde``, the minimum detectable effect of the detector's power ``formula`` at this n and ``alpha`` with
    power 0.8; and the one-row ``effect`` table that states the resampling unit."""
    inflation = paired_inflation(first, second, images, n_resamples, seed, ci_level)
    mde = detector_mde(formula, inflation.n_items, alpha, chance=chance)
    table = pd.DataFrame([{
        "inflation": inflation.estimate, "ci_low": inflation.low, "ci_high": inflation.high,
        "confidence": inflation.confidence, "resampling_unit": inflation.unit, "resampling": inflation.resampling,
        "n_clusters": inflation.n_clusters, "n_items": inflation.n_items, "n_resamples": inflation.n_resamples,
        "mde": mde, "mde_power": MDE_POWER, "alpha": alpha,
    }])
    return {**inflation.metrics(), "mde": mde}, table


def pair_frame(table: pd.DataFrame, first_kind: str, second_kind: str, strata: Sequence[str]) -> pd.DataFrame:
    """One row per example with both arms asked: statuses, outcomes over the answered probes, the
    lost/gained flags (NaN when the pair lacks an answer, ``paired`` False), strata."""
    answered = table["status"] != Status.error.value
    first = table[table["kind"] == first_kind].drop_duplicates("example_id").set_index("example_id")
    second = table[table["kind"] == second_kind].assign(answered_correct=table["correct"].where(answered))
    second = second.groupby("example_id").agg(
        n_second=("correct", "size"), second_correct=("answered_correct", "mean"),
        second_errors=("status", lambda s: int((s == Status.error.value).sum())),
        second_no_answer=("status", lambda s: int((s == Status.no_answer.value).sum())),
        second_choices=("choice", lambda s: "|".join("" if c is None else str(c) for c in s)))
    frame = first[["probe_id", "status", "choice", "correct", *(f"stratum.{name}" for name in strata)]].join(
        second, how="inner")
    frame = frame.rename(columns={"probe_id": "first_probe_id", "status": "first_status", "choice": "first_choice",
                                  "correct": "first_correct"})
    first_correct = frame["first_correct"].astype(float).where(frame["first_status"] != Status.error.value)
    frame["second_correct"] = frame["second_correct"].astype(float)
    frame["paired"] = first_correct.notna() & frame["second_correct"].notna()
    frame["lost"] = first_correct * (1.0 - frame["second_correct"])
    frame["gained"] = (1.0 - first_correct) * frame["second_correct"]
    frame.columns = [column.removeprefix("stratum.") for column in frame.columns]
    return frame.reset_index()


def paired_metrics(table: pd.DataFrame, first_kind: str, second_kind: str, n_permutations: int, seed: int,
                   ci_level: float) -> dict[str, float]:
    """:func:`paired_statistics` over the answered pairs, and ``n_excluded_pairs``."""
    pairs_ = pairs(table, first_kind, second_kind)
    return {**paired_statistics(pairs_, n_permutations, seed, ci_level), "n_excluded_pairs": float(pairs_.excluded)}


def strata_table(table: pd.DataFrame, first_kind: str, second_kind: str, strata: Sequence[str],
                 n_permutations: int, seed: int, ci_level: float) -> pd.DataFrame:
    """The paired statistics (answered pairs) per value of each stratum field."""
    rows = []
    for name in strata:
        column = f"stratum.{name}"
        for value in sorted(table[column].dropna().unique()):
            subset = table[table[column] == value]
            values = paired_statistics(pairs(subset, first_kind, second_kind), n_permutations, seed, ci_level)
            rows.append({"field": name, "value": value, **values})
    return pd.DataFrame(rows)


def skipped_table(skipped: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """The probes that could not be made, with their example, the kind of reason and its detail."""
    return pd.DataFrame([{"probe_id": probe_id, "example_id": example_of(probe_id), "reason": reason.split(":", 1)[0],
                          "detail": reason} for probe_id, reason in skipped],
                        columns=["probe_id", "example_id", "reason", "detail"])


def example_of(probe_id: str) -> str:
    """The example id of ``<example_id>::<kind>[::<variant>]`` (example ids may hold "::" too)."""
    head, _, last = probe_id.rpartition("::")
    if last.isdigit() and "::" in head:
        head = head.rpartition("::")[0]
    return head or probe_id


def skipped_metrics(skipped: Sequence[tuple[str, str]]) -> dict[str, float]:
    """``n_skipped`` (examples) and ``n_skipped.<reason>`` per kind of reason."""
    return reason_metrics("n_skipped", skipped_table(skipped).drop_duplicates("example_id")["detail"])


def skipped_probe_metrics(skipped: Sequence[tuple[str, str]]) -> dict[str, float]:
    """``n_skipped_probes`` and ``n_skipped_probes.<reason>``: counted per probe, for probe sets
    whose skipped ids do not name an example (a release's own probe ids)."""
    frame = skipped_table(skipped)
    out = {"n_skipped_probes": float(len(frame))}
    for reason, count in frame["reason"].value_counts().items():
        out[f"n_skipped_probes.{metric_name(reason)}"] = float(count)
    return out


def proportion_bars(ax, bars: Sequence[tuple[str, float, float, float]], title: str, ylabel: str,
                    reference: tuple[float, str] | None = None) -> None:
    """Bars with interval whiskers: ``(label, estimate, low, high)``; an optional reference line."""
    labels = [label for label, *_ in bars]
    values = np.array([value for _, value, _, _ in bars], dtype=float)
    lows = np.array([low for _, _, low, _ in bars], dtype=float)
    highs = np.array([high for _, _, _, high in bars], dtype=float)
    errors = np.vstack([np.nan_to_num(values - lows), np.nan_to_num(highs - values)])
    positions = np.arange(len(bars))
    ax.bar(positions, np.nan_to_num(values), yerr=errors, capsize=4, color="#4C72B0", alpha=0.85)
    ax.set_xticks(positions, labels)
    if reference is not None:
        ax.axhline(reference[0], color="#C44E52", linestyle="--", linewidth=1, label=reference[1])
        ax.legend(loc="upper right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
