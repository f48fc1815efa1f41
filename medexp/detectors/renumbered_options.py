"""Detector ``renumbered_options``: the options under other labels (lmms-eval's ``number_option``
setting, for images).

Every multiple-choice example is asked as released, its options labelled A, B, C, ...
(``original``), and with the same options in the same order under other labels, 1, 2, 3, ... by
default (``renumbered``, one probe per label set of ``label_sets``;
:mod:`medexp.probes.option_forms`), with the same image, question and prompt wording. Only the
labels differ, so a model that knows the answer finds it under either; a model that recalls the
answer's letter rather than the answer loses it. Replies are read in the labels each probe showed
and scored as positional choices; a letter reply to a numbered probe ("B") is none of its labels,
a no-answer, so a model answering with the letter it remembers shows up as a drop (and is counted,
``letter_replies_renumbered``).

Metrics (paired over the examples with both arms answered, :mod:`medexp.detectors.answer_arms`):
``acc_letters`` (accuracy as released, MM-Detect's CR) and ``acc_renumbered`` with Wilson
intervals (unit: probe), ``delta`` = acc_letters - acc_renumbered (the paired accuracy drop),
``phi`` (right under letters and wrong renumbered, over the examples), the discordant counts b
(right under letters only) and c (right renumbered only), the no-answer rate of each arm over its
replies, the inflation acc_letters - acc_renumbered with its 95% interval clustered by image and the
MDE (:func:`medexp.detectors.answer_arms.effect_size`; the ``effect`` table states the resampling
unit). An error row (no reply) is neither right nor wrong: a pair lacking an answer on either arm
leaves the test (``n_excluded_pairs``).

p-value: one-sided, "right under the letters more often than under other labels". With one label
set, the exact McNemar test on b and c; with several, the within-example relabelling test (which
of an example's probes is the original is a uniformly random label under the null; seeded from the
cell; :func:`medexp.stats.paired.relabel_test`). The null: the model's correctness does not depend
on the labels. ``statistic`` is delta. What the null does not cover: a model that follows numbered
options less well than lettered ones whatever the benchmark (a format effect, not memory); read a
flag beside the no-answer rates and a clean model's drop on the same probes (the demo's
``demo_clean_probes``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from medexp.answers.parse import parse_letter
from medexp.answers.table import Status
from medexp.config.schemas import RenumberedOptionsConfig
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
from medexp.probes.base import option_letters
from medexp.probes.choice import ORIGINAL
from medexp.probes.option_forms import RENUMBERED
from medexp.stats.detector_power import ACCURACY_DIFFERENCE, PAIRED_ACCURACY, PowerFormula

ARMS = ((ORIGINAL, "letters"), (RENUMBERED, "renumbered"))
# The shared paired statistics (first arm: as released; second: renumbered) under this detector's names.
NAMES = {"cr": "acc_letters", "pcr": "acc_renumbered", "cr_ci_low": "acc_letters_ci_low",
         "cr_ci_high": "acc_letters_ci_high", "pcr_ci_low": "acc_renumbered_ci_low",
         "pcr_ci_high": "acc_renumbered_ci_high"}


def renumbered_options_detector(responses: pd.DataFrame, facts: pd.DataFrame, cfg, seed: int,
                                skipped: Sequence[tuple[str, str]] = ()) -> DetectorResult:
    """The options under other labels, for one model on one benchmark.

    ``responses``: the judged table of the ``original`` and ``renumbered`` probes; ``facts``:
    :func:`medexp.detectors.answer_arms.probe_facts` of the same probes (with ``cfg.strata``);
    ``skipped``: the probe maker's skips; ``seed``: the cell's seed.
    """
    table = joined(responses, facts, (ORIGINAL, RENUMBERED))
    test_seed = derive_seed(seed, "renumbered_options", "relabel")
    metrics = as_drop(paired_metrics(table, ORIGINAL, RENUMBERED, cfg.n_permutations, test_seed, cfg.ci_level))
    if metrics["n_pairs"] == 0:
        raise ValueError("renumbered_options: no example has both an original and a renumbered probe answered "
                         f"({metrics['n_excluded_pairs']:.0f} pair(s) lack an answer)")
    for kind, name in ARMS:
        metrics.update(status_counts(table, kind, name))
        metrics[f"no_answer_rate_{name}"] = _no_answer_rate(metrics, name)
    metrics.update(skipped_metrics(skipped))
    metrics.update(letter_replies(table[table["kind"] == RENUMBERED]))
    answered = pairs(table, ORIGINAL, RENUMBERED)
    effect, effect_table = effect_size(
        DECLARATION.power, answered.first, answered.second_means(), example_images(table, ORIGINAL, answered.example_ids),
        cfg.alpha, derive_seed(seed, "renumbered_options", "inflation"), cfg.ci_level)
    metrics.update(effect)
    originals = table[(table["kind"] == ORIGINAL) & table["example_id"].isin(answered.example_ids)]
    metrics.update({
        "statistic": metrics["delta"],
        "n_examples": metrics["n_pairs"],
        "flag": float(metrics["p_value"] < cfg.alpha),
        "n_label_sets": float(table[table["kind"] == RENUMBERED].groupby("example_id").size().max()),
        "chance_rate": float(np.mean(1.0 / originals["n_options"].astype(float))),
    })
    strata = strata_table(table, ORIGINAL, RENUMBERED, cfg.strata, cfg.n_permutations, test_seed, cfg.ci_level)
    outcomes = outcome_table(table)
    tables = {
        "per_probe": table.assign(options=table["options"].map(_joined_options)),
        "strata": as_drop(strata) if len(strata) else strata,
        "outcomes": outcomes,
        "effect": effect_table,
        "skipped": skipped_table(skipped),
    }
    per_example = pair_frame(table, ORIGINAL, RENUMBERED, cfg.strata)
    return DetectorResult(metrics, per_example, "per_example", {"renumbered_options": _figure(metrics, outcomes)},
                          tables)


def as_drop(values):
    """Paired statistics (a dict, or a strata table) under this detector's names, delta turned into
    the drop acc_letters - acc_renumbered (the shared statistics give acc_renumbered - acc_letters)."""
    if isinstance(values, pd.DataFrame):
        return values.rename(columns=NAMES).assign(delta=-values["delta"])
    renamed = {NAMES.get(name, name): value for name, value in values.items()}
    renamed["delta"] = -values["delta"]
    return renamed


def _no_answer_rate(metrics: Mapping[str, float], arm: str) -> float:
    """The share of an arm's replies (error rows, no reply, left out) that commit to no option."""
    replies = metrics[f"n_ok_{arm}"] + metrics[f"n_no_answer_{arm}"]
    return metrics[f"n_no_answer_{arm}"] / replies if replies else float("nan")


def letter_replies(renumbered: pd.DataFrame) -> dict[str, float]:
    """How many no-answers to relabelled probes are an option letter the probe did not show
    (``letter_replies_renumbered``), and how many of those are the gold's letter
    (``gold_letter_replies_renumbered``): the strict parser reading the reply as if the probe had
    been lettered. A model recalling the released letter answers so."""
    letters = gold = 0
    for row in renumbered[renumbered["status"] == Status.no_answer.value].itertuples(index=False):
        options = row.options if isinstance(row.options, tuple) else None
        if options is None:
            continue
        letter = parse_letter(row.response, option_letters(len(options)), options)
        letters += letter is not None
        gold += letter is not None and letter == row.gold
    return {"letter_replies_renumbered": float(letters), "gold_letter_replies_renumbered": float(gold)}


def outcome_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per arm, the shares of its replies (error rows left out) that are right, wrong or no answer."""
    rows = []
    for kind, name in ARMS:
        replies = table[(table["kind"] == kind) & (table["status"] != Status.error.value)]
        n = len(replies)
        right = int(replies["correct"].sum())
        no_answer = int((replies["status"] == Status.no_answer.value).sum())
        rows.append({"arm": name, "n_replies": n, "right": right / n if n else np.nan,
                     "wrong": (n - right - no_answer) / n if n else np.nan,
                     "no_answer": no_answer / n if n else np.nan})
    return pd.DataFrame(rows, columns=["arm", "n_replies", "right", "wrong", "no_answer"])


def _joined_options(options) -> str | None:
    return " | ".join(options) if isinstance(options, tuple) else None


def _figure(metrics: dict[str, float], outcomes: pd.DataFrame):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 3.6), layout="constrained")
    left, right = figure.subplots(1, 2)
    proportion_bars(left, [("A, B, C (released)", metrics["acc_letters"], metrics["acc_letters_ci_low"],
                            metrics["acc_letters_ci_high"]),
                           ("other labels (renumbered)", metrics["acc_renumbered"], metrics["acc_renumbered_ci_low"],
                            metrics["acc_renumbered_ci_high"])],
                    f"drop = {metrics['delta']:+.3f}, p = {metrics['p_value']:.3g}", "accuracy (Wilson CI)",
                    (metrics["chance_rate"], "chance"))
    bottom = np.zeros(len(outcomes))
    for column, color in (("right", "#55A868"), ("wrong", "#C44E52"), ("no_answer", "#8C8C8C")):
        shares = outcomes[column].fillna(0.0).to_numpy()
        right.bar(outcomes["arm"], shares, bottom=bottom, label=column.replace("_", " "), color=color)
        bottom += shares
    right.set_ylim(0, 1.05)
    right.set_ylabel("share of replies")
    right.set_title("what the replies commit to", fontsize=10)
    right.legend(fontsize=8)
    return figure


DECLARATION = DetectorDeclaration(
    name="renumbered_options",
    schema=RenumberedOptionsConfig,
    evaluator="medexp.evaluators.probe_forms:renumbered_options",
    probes="medexp.evaluators.probe_forms:renumbered_options_probes",
    inputs=frozenset({Input.answers}),
    controls=SCORING_CONTROLS,
    power=PowerFormula(PAIRED_ACCURACY, "one", "items with options", ACCURACY_DIFFERENCE,
                       "one-sided exact McNemar: right under the released letters more often than under other labels"),
    power_count="medexp.evaluators.power_counts:items_with_options",
    docs="docs/probes.md#renumbered_options-the-options-under-other-labels",
)
