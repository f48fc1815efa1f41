"""Detector ``slot_guess``: MM-Detect's slot guessing on back-translated text.

Every example's text (question or caption) is asked with one keyword masked (``slot_mask``),
and its back-translation (English -> pivot -> English) with *the same word* masked
(``back_translation``), same image, same template, same decoding. A model that can fill the
slot in the released wording but not in a paraphrase of it has likely seen the released text.

Correctness is the cell's judge's (``judge=read`` by default: the masked word stated in the reply;
``judge=exact``: normalised exact match, or ROUGE-L F1 over a threshold). Metrics, paired over the examples with both probes
(:mod:`medexp.detectors.answer_arms`): CR (original), PCR (back-translated), Delta = PCR - CR,
Phi, b and c, Wilson intervals; and, whatever the judgment, exact match (``em_original``,
``em_back``) and mean ROUGE-L F1 (``rouge_original``, ``rouge_back``, ``delta_rouge``; an
no-answer scores 0); the inflation CR - PCR with its 95% interval clustered by image and
the MDE (:func:`medexp.detectors.answer_arms.effect_size`). Only answered probes count: an error
row (no reply) is neither right nor wrong, and a pair lacking an answer on either arm leaves every
metric (``n_excluded_pairs``). ``n_skipped`` counts the
examples that gave no probe (no keyword shared by the two texts, an unchanged back-translation).

p-value: the exact one-sided McNemar test on b and c (the original wording is filled right more
often). ``statistic`` is Delta. A keyword visible in the image can be guessed from the image in
both arms; that adds concordant pairs and costs power, never validity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from medexp.answers.parse import exact_match, rouge_l
from medexp.answers.table import Status
from medexp.config.schemas import SlotGuessConfig
from medexp.detectors.answer_arms import (
    effect_size,
    example_images,
    joined,
    pair_frame,
    paired_metrics,
    pairs,
    proportion_bars,
    skipped_metrics,
    skipped_table,
    status_counts,
    strata_table,
)
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.kernel.hashing import derive_seed
from medexp.probes.slots import BACK_TRANSLATION, SLOT_MASK
from medexp.stats.detector_power import ACCURACY_DIFFERENCE, PAIRED_ACCURACY, PowerFormula

ARMS = ((SLOT_MASK, "original"), (BACK_TRANSLATION, "back"))


def slot_guess_detector(responses: pd.DataFrame, facts: pd.DataFrame, cfg, seed: int,
                        skipped: Sequence[tuple[str, str]] = ()) -> DetectorResult:
    """Slot guessing of one model on one benchmark (arguments as for ``option_order_detector``)."""
    table = joined(responses, facts, (SLOT_MASK, BACK_TRANSLATION))
    ok = table["status"] == Status.ok.value
    table["exact"] = [bool(is_ok) and exact_match(str(reply), gold)
                      for is_ok, reply, gold in zip(ok, table["response"], table["gold"])]
    table["rouge_l"] = [rouge_l(str(reply), gold) if is_ok else 0.0
                        for is_ok, reply, gold in zip(ok, table["response"], table["gold"])]
    metrics = paired_metrics(table, SLOT_MASK, BACK_TRANSLATION, 1, seed, cfg.ci_level)
    if metrics["n_pairs"] == 0:
        raise ValueError("slot_guess: no example has both a slot_mask and a back_translation probe answered "
                         f"({metrics['n_excluded_pairs']:.0f} pair(s) lack an answer)")
    per_example = pair_frame(table, SLOT_MASK, BACK_TRANSLATION, cfg.strata)
    used = per_example.loc[per_example["paired"], "example_id"]
    paired = table[table["example_id"].isin(used) & (table["status"] != Status.error.value)]
    for kind, name in ARMS:
        metrics.update(status_counts(table, kind, name))
        arm = paired[paired["kind"] == kind]
        metrics[f"em_{name}"] = float(arm["exact"].mean())
        metrics[f"rouge_{name}"] = float(arm["rouge_l"].mean())
    metrics.update(skipped_metrics(skipped))
    answered = pairs(table, SLOT_MASK, BACK_TRANSLATION)
    effect, effect_table = effect_size(
        DECLARATION.power, answered.first, answered.second_means(), example_images(table, SLOT_MASK, answered.example_ids),
        cfg.alpha, derive_seed(seed, "slot_guess", "inflation"), cfg.ci_level)
    metrics.update(effect)
    metrics.update({
        "delta_em": metrics["em_back"] - metrics["em_original"],
        "delta_rouge": metrics["rouge_back"] - metrics["rouge_original"],
        "statistic": metrics["delta"],
        "n_examples": metrics["n_pairs"],
        "flag": float(metrics["p_value"] < cfg.alpha),
    })
    words = paired.pivot_table(index="example_id", columns="kind", values="correct", aggfunc="first")
    per_example = per_example.merge(
        table[table["kind"] == SLOT_MASK][["example_id", "masked_word", "gold"]], on="example_id", how="left")
    tables = {
        "per_probe": table.drop(columns=["options"]),
        "strata": strata_table(table, SLOT_MASK, BACK_TRANSLATION, cfg.strata, 1, seed, cfg.ci_level),
        "masked_words": _word_table(per_example[per_example["paired"]], words),
        "effect": effect_table,
        "skipped": skipped_table(skipped),
    }
    return DetectorResult(metrics, per_example, "per_example", {"slot_guess": _figure(metrics)}, tables)


def _word_table(per_example: pd.DataFrame, words: pd.DataFrame) -> pd.DataFrame:
    """Per masked word: how often it was masked and filled right in each arm."""
    frame = per_example[["example_id", "masked_word"]].set_index("example_id").join(words)
    grouped = frame.groupby("masked_word")
    return pd.DataFrame({
        "n": grouped.size(),
        "right_original": grouped[SLOT_MASK].sum().astype(int),
        "right_back": grouped[BACK_TRANSLATION].sum().astype(int),
    }).sort_values("n", ascending=False).reset_index()


def _figure(metrics: dict[str, float]):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 3.6), layout="constrained")
    left, right = figure.subplots(1, 2)
    proportion_bars(left, [("original", metrics["cr"], metrics["cr_ci_low"], metrics["cr_ci_high"]),
                           ("back-translated", metrics["pcr"], metrics["pcr_ci_low"], metrics["pcr_ci_high"])],
                    f"slot filled right: Delta = {metrics['delta']:+.3f}, p = {metrics['p_value']:.3g}",
                    "accuracy (Wilson CI)")
    values = [metrics["rouge_original"], metrics["rouge_back"]]
    right.bar(np.arange(2), values, color="#8172B2")
    right.set_xticks(np.arange(2), ["original", "back-translated"])
    right.set_ylim(0, 1.05)
    right.set_ylabel("mean ROUGE-L F1")
    right.set_title(f"ROUGE-L: Delta = {metrics['delta_rouge']:+.3f}", fontsize=10)
    return figure


DECLARATION = DetectorDeclaration(
    name="slot_guess",
    schema=SlotGuessConfig,
    evaluator="medexp.evaluators.mmdetect:slot_guess",
    probes="medexp.evaluators.mmdetect:slot_guess_probes",
    inputs=frozenset({Input.answers}),
    controls=SCORING_CONTROLS,
    power=PowerFormula(PAIRED_ACCURACY, "one", "items (an upper bound: items without a shared keyword are skipped at "
                       "run time)", ACCURACY_DIFFERENCE, "one-sided exact McNemar: the original wording filled right more often"),
    power_count="medexp.evaluators.power_counts:examples",
    docs="docs/mmdetect.md#slot_guess-slot-guessing-on-back-translated-text",
)
