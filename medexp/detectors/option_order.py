"""Detector ``option_order``: MM-Detect's option order sensitivity test.

Every multiple-choice example is asked twice or more, with the same image, question and prompt
wording: its options in canonical (released) order (``original``) and permuted so that the gold
option lands on another letter (``option_shuffle``, ``n_variants`` permutations). A model that
memorised the benchmark with its canonical option order loses accuracy when the options move.

Metrics (paired over the examples with both arms, :mod:`medexp.detectors.answer_arms`): CR
(accuracy on the original probes), PCR (on the shuffled ones), Delta = PCR - CR, Phi (right
before and wrong after, over the examples), the discordant counts b and c, Wilson intervals
(unit: probe), the inflation CR - PCR with its 95% interval clustered by image and the MDE
(:func:`medexp.detectors.answer_arms.effect_size`; the ``effect`` table states the resampling unit).
Only answered probes count: an error row (no reply) is neither right nor wrong, and a
pair lacking an answer on either arm leaves the test (``n_excluded_pairs``).

p-value: one-sided, "the canonical order is answered right more often than a shuffle". With one
shuffle per example, the exact McNemar test on b and c. With several, the within-example
relabelling test (which of an example's probes is the original is a uniformly random label under
the null; seeded from the cell); see :func:`medexp.stats.paired.relabel_test` for why not a sign
flip. ``statistic`` is Delta.

Position bias: the letter table reports how often each letter is chosen and is gold on each arm,
and what a position-blind model would choose. A clean model with a letter preference and a
benchmark whose canonical gold letters are skewed (``canonical_gold_skew``: total variation
distance between the original gold letters and a position-uniform placement) shows a Delta
without any memory of the benchmark: read a small p with these two figures.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from medexp.answers.table import Status
from medexp.benchmarks.options import LETTERS
from medexp.config.schemas import OptionOrderConfig
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
from medexp.detectors.medvigil_compare import letter_preference_test
from medexp.detectors.medvigil_tables import letter_preference
from medexp.kernel.hashing import derive_seed
from medexp.probes.choice import OPTION_SHUFFLE, ORIGINAL
from medexp.stats.detector_power import ACCURACY_DIFFERENCE, PAIRED_ACCURACY, PowerFormula

ARMS = ((ORIGINAL, "original"), (OPTION_SHUFFLE, "shuffled"))


def option_order_detector(responses: pd.DataFrame, facts: pd.DataFrame, cfg, seed: int,
                          skipped: Sequence[tuple[str, str]] = ()) -> DetectorResult:
    """Option order sensitivity of one model on one benchmark.

    ``responses``: the response table of the ``original`` and ``option_shuffle`` probes;
    ``facts``: :func:`medexp.detectors.answer_arms.probe_facts` of the same probes (with
    ``cfg.strata``); ``skipped``: the probe maker's skips; ``seed``: the cell's seed.
    """
    table = joined(responses, facts, (ORIGINAL, OPTION_SHUFFLE))
    test_seed = derive_seed(seed, "option_order", "relabel")
    metrics = paired_metrics(table, ORIGINAL, OPTION_SHUFFLE, cfg.n_permutations, test_seed, cfg.ci_level)
    if metrics["n_pairs"] == 0:
        raise ValueError("option_order: no example has both an original and an option_shuffle probe answered "
                         f"({metrics['n_excluded_pairs']:.0f} pair(s) lack an answer)")
    for kind, name in ARMS:
        metrics.update(status_counts(table, kind, name))
    metrics.update(skipped_metrics(skipped))
    per_example = pair_frame(table, ORIGINAL, OPTION_SHUFFLE, cfg.strata)
    used = per_example.loc[per_example["paired"], "example_id"]
    originals = table[(table["kind"] == ORIGINAL) & table["example_id"].isin(used)]
    letters = letter_table(table)
    shuffled = table[table["kind"] == OPTION_SHUFFLE]
    answered = pairs(table, ORIGINAL, OPTION_SHUFFLE)
    effect, effect_table = effect_size(
        DECLARATION.power, answered.first, answered.second_means(), example_images(table, ORIGINAL, answered.example_ids),
        cfg.alpha, derive_seed(seed, "option_order", "inflation"), cfg.ci_level)
    metrics.update(effect)
    metrics.update({
        "statistic": metrics["delta"],
        "n_examples": metrics["n_pairs"],
        "flag": float(metrics["p_value"] < cfg.alpha),
        "n_variants": float(shuffled.groupby("example_id").size().max()),
        "chance_rate": float(np.mean(1.0 / originals["n_options"].astype(float))),
        "canonical_gold_skew": canonical_gold_skew(originals),
        "letter_tv_original": _tv(letters, "original"),
        "letter_tv_shuffled": _tv(letters, "shuffled"),
        # chi-square of the letters chosen on the shuffled arm against a position-blind model
        "letter_bias_p_shuffled": letter_preference_test(shuffled)["p_value"],
    })
    tables = {
        "per_probe": table.assign(options=table["options"].map(_joined_options)),
        "strata": strata_table(table, ORIGINAL, OPTION_SHUFFLE, cfg.strata, cfg.n_permutations, test_seed,
                               cfg.ci_level),
        "letters": letters,
        "effect": effect_table,
        "skipped": skipped_table(skipped),
    }
    return DetectorResult(metrics, per_example, "per_example", {"option_order": _figure(metrics, letters)}, tables)


def _joined_options(options) -> str | None:
    return " | ".join(options) if isinstance(options, tuple) else None


def letter_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per letter and arm: shares chosen and gold (ok replies) and a position-blind model's share."""
    parts = []
    for kind, name in ARMS:
        rows = table[table["kind"] == kind]
        prefs = letter_preference(rows).set_index("letter")[["chosen_share", "gold_share"]] / 100.0
        prefs.columns = [f"chosen_{name}", f"gold_{name}"]
        parts.append(prefs)
        parts.append(_position_blind(rows[rows["status"] == Status.ok.value]).rename(f"blind_{name}"))
    frame = pd.concat(parts, axis=1).fillna(0.0)
    return frame.loc[sorted(frame.index, key=LETTERS.index)].rename_axis("letter").reset_index()


def _position_blind(rows: pd.DataFrame) -> pd.Series:
    """The share of each letter a model choosing uniformly among each probe's letters would give."""
    sizes = rows["options"].map(len).to_numpy() if len(rows) else np.zeros(0, dtype=int)
    width = int(sizes.max()) if sizes.size else 0
    shares = [float(np.sum((sizes > index) / sizes) / max(sizes.size, 1)) for index in range(width)]
    return pd.Series(shares, index=list(LETTERS[:width]), dtype=float)


def canonical_gold_skew(originals: pd.DataFrame) -> float:
    """Total variation distance between the original probes' gold letters and a position-uniform placement."""
    if originals.empty:
        return float("nan")
    blind = _position_blind(originals)
    gold = originals["gold"].value_counts(normalize=True).reindex(blind.index, fill_value=0.0)
    return float(0.5 * np.abs(gold - blind).sum())


def _tv(letters: pd.DataFrame, arm: str) -> float:
    """Total variation distance between the letters chosen and the gold letters on one arm."""
    return float(0.5 * np.abs(letters[f"chosen_{arm}"] - letters[f"gold_{arm}"]).sum())


def _figure(metrics: dict[str, float], letters: pd.DataFrame):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 3.6), layout="constrained")
    left, right = figure.subplots(1, 2, width_ratios=[1, 2])
    proportion_bars(left, [("CR (original)", metrics["cr"], metrics["cr_ci_low"], metrics["cr_ci_high"]),
                           ("PCR (shuffled)", metrics["pcr"], metrics["pcr_ci_low"], metrics["pcr_ci_high"])],
                    f"Delta = {metrics['delta']:+.3f}, p = {metrics['p_value']:.3g}", "accuracy (Wilson CI)",
                    (metrics["chance_rate"], "chance"))
    positions = np.arange(len(letters))
    width = 0.2
    for offset, column, label, color in ((-1.5, "gold_original", "gold, original", "#55A868"),
                                         (-0.5, "chosen_original", "chosen, original", "#4C72B0"),
                                         (0.5, "gold_shuffled", "gold, shuffled", "#8DCB9B"),
                                         (1.5, "chosen_shuffled", "chosen, shuffled", "#93A9D6")):
        right.bar(positions + offset * width, letters[column], width, label=label, color=color)
    right.set_xticks(positions, letters["letter"])
    right.set_ylabel("share of ok replies")
    right.set_title("letters chosen and gold", fontsize=10)
    right.legend(fontsize=8)
    return figure


DECLARATION = DetectorDeclaration(
    name="option_order",
    schema=OptionOrderConfig,
    evaluator="medexp.evaluators.mmdetect:option_order",
    probes="medexp.evaluators.mmdetect:option_order_probes",
    inputs=frozenset({Input.answers}),
    controls=SCORING_CONTROLS,
    power=PowerFormula(PAIRED_ACCURACY, "one", "items with options", ACCURACY_DIFFERENCE,
                       "one-sided exact McNemar: canonical order right more often than shuffled"),
    power_count="medexp.evaluators.power_counts:items_with_options",
    docs="docs/mmdetect.md#option_order-option-order-sensitivity",
)
