"""Detector ``none_option``: the gold's text replaced by "None of the above" (lmms-eval's
``gt_none_option`` setting, for images).

Every multiple-choice example is asked as released (``original``) and with its gold option's
text removed and a none option added (``none_option``, :mod:`medexp.probes.option_forms`): the
right answer is now the none option, and the gold's original letter shows a distractor. A model
that knows the answer picks the none option; one that recalls where the answer stood keeps the
gold's letter ("kept").

Over the examples whose none-option probe was answered (an error row, no reply, is left out and
counted): K = kept the gold's letter, N = picked the none option, O = another option or no
answer. ``rate_kept`` = K / n and ``rate_none`` = N / n with Wilson intervals (unit: example),
``statistic`` = rate_kept - rate_none.

p-value: one-sided exact sign test of K against N given K + N (``mcnemar_exact(K, N)``: the
same binomial as McNemar's test, each example contributing at most one of the two). Null: the
model has no memory of where the gold stood. A model guessing uniformly picks the kept letter
and the none option alike (1/k each); a model that knows the answer picks the none option, so
knowledge only lowers K against N. What the null does not cover: a model whose letter preference
(``letters`` table: the letters chosen on the original arm) happens to favour the benchmark's
canonical gold letters over the none option's (usually the last) letter; read a small p with
``kept_share_blind``, the share of kept letters a position-blind guesser would choose, and the
letter table.

Paired with the original arm: ``kept_after_right`` = K among the examples answered right as
released (a model recalling positions answers those right and then keeps the letter), and the
inflation rate_kept - rate_none with its 95% interval clustered by image and the MDE
(:func:`medexp.detectors.answer_arms.effect_size`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from medexp.answers.table import Status
from medexp.config.schemas import NoneOptionConfig
from medexp.detectors.answer_arms import (
    effect_size,
    joined,
    proportion_bars,
    skipped_metrics,
    skipped_table,
    status_counts,
)
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.detectors.medvigil_tables import letter_preference
from medexp.kernel.hashing import derive_seed
from medexp.probes.choice import ORIGINAL
from medexp.probes.option_forms import NONE_OPTION
from medexp.stats.detector_power import PAIRED_ACCURACY, PowerFormula
from medexp.stats.paired import mcnemar_exact, wilson_interval


def none_option_detector(responses: pd.DataFrame, facts: pd.DataFrame, cfg, seed: int,
                         skipped: Sequence[tuple[str, str]] = ()) -> DetectorResult:
    """The none-option probe of one model on one benchmark (``facts``: probe_facts with ``cfg.strata``)."""
    table = joined(responses, facts, (ORIGINAL, NONE_OPTION))
    per_example = outcome_frame(table, cfg.strata)
    answered = per_example[per_example["none_status"] != Status.error.value]
    if answered.empty:
        raise ValueError(f"none_option: none of the {len(per_example)} none-option probes was answered")
    metrics = outcome_metrics(answered, cfg.ci_level)
    effect, effect_table = effect_size(
        DECLARATION.power, answered["kept"].to_numpy(dtype=np.float64), answered["none"].to_numpy(dtype=np.float64),
        list(answered["image"]), cfg.alpha, derive_seed(seed, "none_option", "inflation"), cfg.ci_level)
    metrics.update(effect)
    for kind, name in ((ORIGINAL, "original"), (NONE_OPTION, "none_option")):
        metrics.update(status_counts(table, kind, name))
    metrics.update(skipped_metrics(skipped))
    metrics.update({
        "statistic": metrics["rate_kept"] - metrics["rate_none"],
        "n_examples": float(len(answered)),
        "n_unanswered": float(len(per_example) - len(answered)),
        "flag": float(metrics["p_value"] < cfg.alpha),
        "kept_share_blind": float(np.mean(1.0 / answered["n_options"].astype(float))),
    })
    letters = pd.concat([letter_preference(table[table["kind"] == kind]).assign(arm=name)
                         for kind, name in ((ORIGINAL, "original"), (NONE_OPTION, "none_option"))], ignore_index=True)
    tables = {
        "per_probe": table.drop(columns=["options"]),
        "strata": _strata(answered, cfg.strata, cfg.ci_level),
        "letters": letters,
        "effect": effect_table,
        "skipped": skipped_table(skipped),
    }
    return DetectorResult(metrics, per_example, "per_example", {"none_option": _figure(metrics)}, tables)


def outcome_frame(table: pd.DataFrame, strata: Sequence[str]) -> pd.DataFrame:
    """One row per example with a none-option probe: its original outcome, what it chose on the
    none-option probe (kept the gold's original letter, the none option, another), strata."""
    original = table[table["kind"] == ORIGINAL].drop_duplicates("example_id").set_index("example_id")
    none = table[table["kind"] == NONE_OPTION].drop_duplicates("example_id").set_index("example_id")
    frame = pd.DataFrame({
        "probe_id": none["probe_id"], "image": none["image"], "n_options": none["n_options"],
        "none_status": none["status"], "none_choice": none["choice"],
        "kept_letter": original["gold"].reindex(none.index), "none_letter": none["gold"],
        "original_status": original["status"].reindex(none.index),
        "original_correct": original["correct"].reindex(none.index),
        **{name: none[f"stratum.{name}"] for name in strata},
    })
    ok = frame["none_status"] == Status.ok.value
    frame["kept"] = (ok & (frame["none_choice"] == frame["kept_letter"])).astype(float)
    frame["none"] = (ok & (frame["none_choice"] == frame["none_letter"])).astype(float)
    frame["other"] = 1.0 - frame["kept"] - frame["none"]
    return frame.reset_index()


def outcome_metrics(answered: pd.DataFrame, ci_level: float) -> dict[str, float]:
    """The kept / none / other rates with Wilson intervals and the sign test of kept against none."""
    n = len(answered)
    kept, none = int(answered["kept"].sum()), int(answered["none"].sum())
    test = mcnemar_exact(kept, none, "greater")
    out = {"n_kept": float(kept), "n_none": float(none), "n_other": float(n - kept - none), "p_value": test.p_value}
    for name, count in (("kept", kept), ("none", none), ("other", n - kept - none)):
        interval = wilson_interval(count, n, ci_level)
        out.update({f"rate_{name}": interval.estimate, f"rate_{name}_ci_low": interval.low,
                    f"rate_{name}_ci_high": interval.high})
    original_ok = answered["original_status"] != Status.error.value
    right = answered[original_ok & answered["original_correct"].astype(bool)]
    out["acc_original"] = float(answered.loc[original_ok, "original_correct"].astype(float).mean()) \
        if original_ok.any() else float("nan")
    out["kept_after_right"] = float(right["kept"].mean()) if len(right) else float("nan")
    return out


def _strata(answered: pd.DataFrame, strata: Sequence[str], ci_level: float) -> pd.DataFrame:
    rows = []
    for name in strata:
        for value, group in answered.groupby(name, sort=True):
            rows.append({"field": name, "value": value, "n": len(group), **outcome_metrics(group, ci_level)})
    return pd.DataFrame(rows)


def _figure(metrics: dict[str, float]):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 3.6), layout="constrained")
    ax = figure.subplots()
    proportion_bars(ax, [(label, metrics[f"rate_{name}"], metrics[f"rate_{name}_ci_low"],
                          metrics[f"rate_{name}_ci_high"])
                         for label, name in (("kept the gold's letter", "kept"), ("none option", "none"),
                                             ("other", "other"))],
                    f"none option: kept - none = {metrics['statistic']:+.3f}, p = {metrics['p_value']:.3g}",
                    "share of answered probes (Wilson CI)", (metrics["kept_share_blind"], "blind guess"))
    return figure


DECLARATION = DetectorDeclaration(
    name="none_option",
    schema=NoneOptionConfig,
    evaluator="medexp.evaluators.probe_forms:none_option",
    probes="medexp.evaluators.probe_forms:none_option_probes",
    inputs=frozenset({Input.answers}),
    controls=SCORING_CONTROLS,
    power=PowerFormula(PAIRED_ACCURACY, "one", "items with options",
                       "rate difference (fraction: kept the gold's letter minus picked the none option)",
                       "one-sided exact sign test: the gold's old letter kept more often than the none option picked"),
    power_count="medexp.evaluators.power_counts:items_with_options",
    docs="docs/probes.md#none_option-the-gold-replaced-by-none-of-the-above",
)
