"""Detector ``open_ended``: the multiple-choice item asked without its options (lmms-eval's
``revert_oe_mcq`` / ``convert_mcq_oe`` settings, for images).

Every multiple-choice example is asked as released (``original``) and as an open question
(``open_ended``, :mod:`medexp.probes.option_forms`), its reply judged against the gold option's
text by the cell's judge (``judge=read`` by default, ``exact``, or a model judge). A model that
answers right only when the options are shown leans on them: memory of an item's answer letter
(or of the option list) rather than of its answer.

Paired over the examples answered in both arms (an error row, no reply, leaves the pair and is
counted; a no-answer is not right): ``acc_options`` (CR) and ``acc_open`` with Wilson intervals
(unit: example), ``drop`` = acc_options - acc_open, b (right with the options, not without) and
c (the reverse), and ``p_drop``, the one-sided exact McNemar p of b against c. ``p_drop`` is
descriptive: every model that guesses among options is right by chance on some items it cannot
answer openly, so a drop alone is no evidence of contamination.

p-value (``p_value``): of the b + d examples answered wrong without options, how many are right
with them, against the chance of a guess among each item's k options (Poisson-binomial tail,
exact; the binomial test when every k is the same). Null: where the model cannot produce the
answer, the options give it no more than a guess. ``inflation`` = the accuracy with options on
those examples minus their mean chance rate, with its 95% interval clustered by image, and the MDE
(:func:`medexp.detectors.answer_arms.effect_size`). What the null does not cover: recognising the
answer among options is easier than recalling it (a clean model that can rule options out beats
chance without any memory of the item); compare the clean and the audited models' rates
(``rate_options_only``), as the demo's null cells do.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from medexp.config.schemas import OpenEndedConfig
from medexp.detectors.answer_arms import (
    effect_size,
    joined,
    pair_frame,
    paired_metrics,
    proportion_bars,
    skipped_metrics,
    skipped_table,
    status_counts,
    strata_table,
)
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.kernel.hashing import derive_seed
from medexp.probes.choice import ORIGINAL
from medexp.probes.option_forms import OPEN_ENDED
from medexp.stats.detector_power import ABOVE_CHANCE, ACCURACY_ABOVE_CHANCE, PowerFormula
from medexp.stats.paired import accuracy_above_chances, wilson_interval


def open_ended_detector(responses: pd.DataFrame, facts: pd.DataFrame, cfg, seed: int,
                        skipped: Sequence[tuple[str, str]] = ()) -> DetectorResult:
    """The open-ended probe of one model on one benchmark (``facts``: probe_facts with ``cfg.strata``)."""
    table = joined(responses, facts, (ORIGINAL, OPEN_ENDED))
    paired = paired_metrics(table, ORIGINAL, OPEN_ENDED, 1, seed, cfg.ci_level)
    if paired["n_pairs"] == 0:
        raise ValueError("open_ended: no example has both its with-options and its open probe answered "
                         f"({paired['n_excluded_pairs']:.0f} pair(s) lack an answer)")
    per_example = pair_frame(table, ORIGINAL, OPEN_ENDED, cfg.strata).rename(columns={
        "first_probe_id": "options_probe_id", "first_status": "options_status", "first_choice": "options_choice",
        "first_correct": "options_correct", "second_correct": "open_correct", "lost": "right_with_options_only",
        "gained": "right_without_options_only"})
    originals = table[table["kind"] == ORIGINAL].drop_duplicates("example_id").set_index("example_id")
    per_example = per_example.join(originals[["image", "n_options"]], on="example_id")
    per_example["chance"] = 1.0 / per_example["n_options"].astype(float)
    open_wrong = per_example[per_example["paired"] & (per_example["open_correct"] == 0.0)]
    metrics = {
        "acc_options": paired["cr"], "acc_open": paired["pcr"], "drop": -paired["delta"], "b": paired["b"],
        "c": paired["c"], "p_drop": paired["p_value"], "n_pairs": paired["n_pairs"],
        "n_excluded_pairs": paired["n_excluded_pairs"], "acc_options_ci_low": paired["cr_ci_low"],
        "acc_options_ci_high": paired["cr_ci_high"], "acc_open_ci_low": paired["pcr_ci_low"],
        "acc_open_ci_high": paired["pcr_ci_high"],
        **options_only_metrics(open_wrong, cfg.ci_level),
    }
    if len(open_wrong):
        effect, effect_table = effect_size(
            DECLARATION.power, open_wrong["options_correct"].to_numpy(dtype=np.float64),
            open_wrong["chance"].to_numpy(dtype=np.float64), list(open_wrong["image"]), cfg.alpha,
            derive_seed(seed, "open_ended", "inflation"), cfg.ci_level, chance=metrics["chance_rate"])
    else:  # every pair answered right without options: no item to test, so no effect either
        effect = dict.fromkeys(("inflation", "inflation_ci_low", "inflation_ci_high", "mde"), float("nan"))
        effect["inflation_n_clusters"] = 0.0
        effect_table = pd.DataFrame()
    metrics.update(effect)
    for kind, name in ((ORIGINAL, "options"), (OPEN_ENDED, "open")):
        metrics.update(status_counts(table, kind, name))
    metrics.update(skipped_metrics(skipped))
    metrics.update({
        "statistic": metrics["rate_options_only"] - metrics["chance_rate"],
        "n_examples": paired["n_pairs"],
        "flag": float(metrics["p_value"] < cfg.alpha),
    })
    tables = {
        "per_probe": table.drop(columns=["options"]),
        "strata": strata_table(table, ORIGINAL, OPEN_ENDED, cfg.strata, 1, seed, cfg.ci_level),
        "effect": effect_table,
        "skipped": skipped_table(skipped),
    }
    return DetectorResult(metrics, per_example, "per_example", {"open_ended": _figure(metrics)}, tables)


def options_only_metrics(open_wrong: pd.DataFrame, ci_level: float) -> dict[str, float]:
    """The examples answered wrong without options: how many are right with them, against chance."""
    nan = float("nan")
    n = len(open_wrong)
    if n == 0:  # every paired example answered right without options: nothing to test
        return {"n_open_wrong": 0.0, "rate_options_only": nan, "rate_options_only_ci_low": nan,
                "rate_options_only_ci_high": nan, "chance_rate": nan, "expected_right": 0.0, "p_value": nan}
    test = accuracy_above_chances(open_wrong["options_correct"].astype(bool).to_numpy(),
                                  open_wrong["chance"].to_numpy(dtype=np.float64))
    rate = wilson_interval(test.k, n, ci_level)
    return {"n_open_wrong": float(n), "rate_options_only": rate.estimate, "rate_options_only_ci_low": rate.low,
            "rate_options_only_ci_high": rate.high, "chance_rate": float(open_wrong["chance"].mean()),
            "expected_right": test.expected, "p_value": test.p_value}


def _figure(metrics: dict[str, float]):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 3.6), layout="constrained")
    ax = figure.subplots()
    proportion_bars(ax, [
        ("with options", metrics["acc_options"], metrics["acc_options_ci_low"], metrics["acc_options_ci_high"]),
        ("open-ended", metrics["acc_open"], metrics["acc_open_ci_low"], metrics["acc_open_ci_high"]),
        ("with options,\nwhere open is wrong", metrics["rate_options_only"], metrics["rate_options_only_ci_low"],
         metrics["rate_options_only_ci_high"]),
    ], f"open-ended: right with options only vs chance, p = {metrics['p_value']:.3g}", "accuracy (Wilson CI)",
        (metrics["chance_rate"], "chance among options"))
    return figure


DECLARATION = DetectorDeclaration(
    name="open_ended",
    schema=OpenEndedConfig,
    evaluator="medexp.evaluators.probe_forms:open_ended",
    probes="medexp.evaluators.probe_forms:open_ended_probes",
    inputs=frozenset({Input.answers}),
    controls=SCORING_CONTROLS,
    power=PowerFormula(ABOVE_CHANCE, "one", "items with options (an upper bound: the test reads those answered "
                       "wrong without options)", ACCURACY_ABOVE_CHANCE,
                       "one-sided exact test: right with options, where wrong without, above chance"),
    power_count="medexp.evaluators.power_counts:items_with_options",
    docs="docs/probes.md#open_ended-the-question-without-its-options",
)
