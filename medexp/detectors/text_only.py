"""Detector ``text_only``: MM-Detect's unimodal leakage probe.

Every multiple-choice example is asked without its image, with an explicit refusal option ("I
don't know", configurable) appended to its options (``text_only``); its with-image counterpart
is the ``original`` probe (canonical options, no refusal option). A model that answers
image-dependent questions right without the image, when it may abstain, has likely seen the
question with its answer.

Metrics: ``acc_text_only`` (right without the image; errors and no-answers are not correct),
``idk_rate`` (the refusal chosen), ``acc_answered`` (right among the replies that chose an answer
option), ``chance_rate`` (mean chance rate of the probes, below), ``acc_image`` (the same
examples with the image) and the paired comparison of the two arms: b (right with the image
only), c (right without it only), ``image_delta`` = acc_text_only - acc_image and
``p_image_gain``, the one-sided exact McNemar p that the image helps. Only answered probes count:
an error row (no reply) is neither right nor wrong nor a refusal; the accuracies, the test and its
chance rate are over the answered text-only probes (``n_text_only``), the paired comparison over
the examples answered in both arms.

``inflation`` = acc_text_only - chance_rate (each answered probe's outcome minus its chance rate)
with its 95% interval clustered by the example's image, and ``mde``, the accuracy above chance
the test detects at power 0.8 (:func:`medexp.detectors.answer_arms.effect_size`).

p-value: the exact one-sided test that more text-only probes are right than chance would give,
each probe with its own chance rate (Poisson-binomial tail; the binomial test when every rate is
the same). The refusal option never counts as a chance answer: a guesser that never abstains is
the null's most successful strategy. Chance rates (``chance``):

* ``uniform``: 1 / k for a probe with k answer options (the refusal not counted);
* ``prior``: the accuracy of always answering the most frequent gold text among the probes with
  the same option set (the options as a set of normalised texts, refusal excluded, plus the
  ``prior_by`` meta fields), computed from the probe set itself; option sets shared by fewer than
  ``min_prior_group`` probes fall back to uniform.

Why ``prior``: a clean model that never saw the benchmark still knows that "yes" is the more
common answer to a yes/no question about a finding, or which organ a modality usually images;
that beats 1/k without any memory of the items. ``prior`` asks whether the model beats the best
answer-frequency guess instead. It is conservative (the most frequent gold is picked in-sample),
so ``uniform`` is the test for benchmarks whose option sets are unique per question, where the
prior has nothing to learn from.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from medexp.answers.table import Status
from medexp.benchmarks.options import LETTERS, normalise
from medexp.config.schemas import TextOnlyConfig
from medexp.config.schemas.mmdetect import ChanceModel
from medexp.detectors.answer_arms import (
    effect_size,
    example_images,
    joined,
    pair_frame,
    paired_metrics,
    proportion_bars,
    skipped_metrics,
    skipped_table,
    status_counts,
)
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.kernel.hashing import derive_seed
from medexp.probes.choice import ORIGINAL, TEXT_ONLY
from medexp.stats.paired import accuracy_above_chances, wilson_interval
from medexp.stats.detector_power import ABOVE_CHANCE, ACCURACY_ABOVE_CHANCE, PowerFormula


def text_only_detector(responses: pd.DataFrame, facts: pd.DataFrame, cfg, seed: int,
                       skipped: Sequence[tuple[str, str]] = ()) -> DetectorResult:
    """The text-only probe of one model on one benchmark. ``facts`` must carry the strata of
    ``cfg.strata`` and ``cfg.prior_by`` (``probe_facts(probes, [*cfg.strata, *cfg.prior_by])``)."""
    table = joined(responses, facts, (ORIGINAL, TEXT_ONLY))
    text = table[table["kind"] == TEXT_ONLY].copy()
    text["chance"], groups = chance_rates(text, ChanceModel(cfg.chance), list(cfg.prior_by), int(cfg.min_prior_group))
    text["refused"] = (text["status"] == Status.ok.value) & (text["choice"] == text["refusal"])
    answered = text[text["status"] != Status.error.value]
    if answered.empty:
        raise ValueError(f"text_only: none of the {len(text)} text-only probes was answered")
    metrics = _chance_metrics(answered, cfg.ci_level)
    # the text-only probe has no image: the cluster is its example's (the original probe's) image
    effect, effect_table = effect_size(
        DECLARATION.power, answered["correct"].to_numpy(dtype=np.float64), answered["chance"].to_numpy(dtype=np.float64),
        example_images(table, ORIGINAL, list(answered["example_id"])), cfg.alpha,
        derive_seed(seed, "text_only", "inflation"), cfg.ci_level, chance=metrics["chance_rate"])
    metrics.update(effect)
    paired = paired_metrics(table, ORIGINAL, TEXT_ONLY, 1, seed, cfg.ci_level)
    metrics.update({
        "acc_image": paired["cr"], "image_delta": paired["delta"], "image_b": paired["b"], "image_c": paired["c"],
        "p_image_gain": paired["p_value"], "n_pairs": paired["n_pairs"], "n_excluded_pairs": paired["n_excluded_pairs"],
        "acc_image_ci_low": paired["cr_ci_low"], "acc_image_ci_high": paired["cr_ci_high"],
    })
    for kind, name in ((ORIGINAL, "image"), (TEXT_ONLY, "text_only")):
        metrics.update(status_counts(table, kind, name))
    metrics.update(skipped_metrics(skipped))
    metrics.update({
        "statistic": metrics["acc_text_only"] - metrics["chance_rate"],
        "n_examples": metrics["n_text_only"],
        "flag": float(metrics["p_value"] < cfg.alpha),
        "n_prior_groups": float((groups["rate_used"] == "prior").sum()) if len(groups) else 0.0,
    })
    per_example = pair_frame(table, ORIGINAL, TEXT_ONLY, cfg.strata).rename(columns={
        "first_probe_id": "image_probe_id", "first_status": "image_status", "first_choice": "image_choice",
        "first_correct": "image_correct", "second_correct": "text_only_correct", "second_choices": "text_only_choice",
        "lost": "right_with_image_only", "gained": "right_without_image_only"})
    per_example = per_example.merge(text[["example_id", "chance", "refused"]], on="example_id", how="left")
    tables = {
        "per_probe": table.drop(columns=["options"]),
        "strata": _strata(answered, cfg.strata, cfg.ci_level),
        "chance_groups": groups,
        "effect": effect_table,
        "skipped": skipped_table(skipped),
    }
    return DetectorResult(metrics, per_example, "per_example", {"text_only": _figure(metrics)}, tables)


def answer_options(options: tuple[str, ...], refusal) -> list[str]:
    """The option texts without the refusal option."""
    keep = [text for index, text in enumerate(options) if refusal is None or LETTERS[index] != refusal]
    return keep


def chance_rates(text: pd.DataFrame, model: ChanceModel, prior_by: Sequence[str],
                 min_group: int) -> tuple[np.ndarray, pd.DataFrame]:
    """Each text-only probe's chance rate, and the option-set groups (``prior``) behind them."""
    sizes = np.array([len(answer_options(options, refusal)) for options, refusal in
                      zip(text["options"], text["refusal"])], dtype=np.float64)
    uniform = 1.0 / sizes
    if model is ChanceModel.uniform:
        return uniform, pd.DataFrame(columns=["group", "n", "most_frequent_gold", "prior_rate", "rate_used"])
    missing = [name for name in prior_by if f"stratum.{name}" not in text.columns]
    if missing:
        raise ValueError(f"text_only: prior_by names {missing}, which the probe facts lack; build them with "
                         f"probe_facts(probes, [*strata, *prior_by])")
    keys = []
    for options, refusal, *extra in zip(text["options"], text["refusal"],
                                        *(text[f"stratum.{name}"] for name in prior_by)):
        option_set = " | ".join(sorted(normalise(option) for option in answer_options(options, refusal)))
        keys.append(" || ".join([option_set, *(f"{name}={value}" for name, value in zip(prior_by, extra))]))
    gold = [normalise(value) for value in text["gold_text"]]
    frame = pd.DataFrame({"group": keys, "gold": gold})
    rows, rate_of = [], {}
    for key, group in frame.groupby("group", sort=True):
        counts = group["gold"].value_counts()
        prior = float(counts.iloc[0] / len(group))
        used = "prior" if len(group) >= min_group else "uniform"
        rows.append({"group": key, "n": len(group), "most_frequent_gold": counts.index[0], "prior_rate": prior,
                     "rate_used": used})
        rate_of[key] = prior if used == "prior" else None
    rates = np.array([rate_of[key] if rate_of[key] is not None else fallback for key, fallback in zip(keys, uniform)])
    return rates, pd.DataFrame(rows)


def _chance_metrics(text: pd.DataFrame, ci_level: float) -> dict[str, float]:
    nan = float("nan")
    n = len(text)
    if n == 0:  # no answer to test: no p-value
        return {"acc_text_only": nan, "p_value": nan, "chance_rate": nan, "idk_rate": nan, "n_text_only": 0.0,
                "acc_text_only_ci_low": nan, "acc_text_only_ci_high": nan, "idk_rate_ci_low": nan,
                "idk_rate_ci_high": nan, "acc_answered": nan, "expected_right": 0.0}
    correct = text["correct"].to_numpy(dtype=bool)
    test = accuracy_above_chances(correct, text["chance"].to_numpy(dtype=np.float64))
    accuracy = wilson_interval(test.k, n, ci_level)
    refused = wilson_interval(int(text["refused"].sum()), n, ci_level)
    answered = (text["status"] == Status.ok.value) & ~text["refused"]
    return {
        "acc_text_only": accuracy.estimate, "acc_text_only_ci_low": accuracy.low,
        "acc_text_only_ci_high": accuracy.high,
        "idk_rate": refused.estimate, "idk_rate_ci_low": refused.low, "idk_rate_ci_high": refused.high,
        "acc_answered": float(correct[answered.to_numpy()].mean()) if answered.any() else nan,
        "chance_rate": float(text["chance"].mean()), "expected_right": test.expected, "p_value": test.p_value,
        "n_text_only": float(n),
    }


def _strata(text: pd.DataFrame, strata: Sequence[str], ci_level: float) -> pd.DataFrame:
    rows = []
    for name in strata:
        for value, group in text.groupby(f"stratum.{name}", sort=True):
            values = _chance_metrics(group, ci_level)
            rows.append({"field": name, "value": value, **values})
    return pd.DataFrame(rows)


def _figure(metrics: dict[str, float]):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 3.6), layout="constrained")
    ax = figure.subplots()
    proportion_bars(ax, [
        ("with image", metrics["acc_image"], metrics["acc_image_ci_low"], metrics["acc_image_ci_high"]),
        ("text only", metrics["acc_text_only"], metrics["acc_text_only_ci_low"], metrics["acc_text_only_ci_high"]),
        ("I don't know", metrics["idk_rate"], metrics["idk_rate_ci_low"], metrics["idk_rate_ci_high"]),
    ], f"text-only accuracy vs chance: p = {metrics['p_value']:.3g}", "share of probes (Wilson CI)",
        (metrics["chance_rate"], "chance"))
    return figure


DECLARATION = DetectorDeclaration(
    name="text_only",
    schema=TextOnlyConfig,
    evaluator="medexp.evaluators.mmdetect:text_only",
    probes="medexp.evaluators.mmdetect:text_only_probes",
    inputs=frozenset({Input.answers}),
    controls=SCORING_CONTROLS,
    power=PowerFormula(ABOVE_CHANCE, "one", "items with options", ACCURACY_ABOVE_CHANCE,
                       "one-sided exact test: text-only accuracy above the chance rate"),
    power_count="medexp.evaluators.power_counts:items_with_options",
    docs="docs/mmdetect.md#text_only-the-unimodal-leakage-probe",
)
