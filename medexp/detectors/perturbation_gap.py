"""Detector ``perturbation_gap``: paired semantic perturbation (Park et al. 2025).

Each benchmark item is asked as released (``original``) and as its perturbed twin
(``perturbed_twin``): the same question and image composition with the visual evidence changed so
that the answer changes. A model that reads the evidence does as well on the twins (the authors
argue the twin set is no harder, often easier); a model that memorised the original answers keeps
giving them and drops.

Metrics, over the pairs whose two probes were answered (a no-answer is not correct; an error row
is no answer, so its pair leaves every metric and is counted in ``n_excluded_pairs``):

* ``acc_original``, ``acc_twin`` with Wilson intervals (unit: item), ``gap`` = acc_original -
  acc_twin (positive: a drop on the twins);
* ``b`` (right on the original, wrong on its twin) and ``c`` (the reverse); ``p_mcnemar``, the
  exact one-sided McNemar test of b against Binomial(b + c, 1/2);
* ``gap_ci_low``/``gap_ci_high``: percentile bootstrap interval of the gap, resampling *pairs*
  (an original travels with its twin, so the interval keeps their correlation);
* ``inflation`` (the gap again) with ``inflation_ci_low``/``inflation_ci_high`` resampling the
  originals' *images* (items sharing an image travel together; the ``effect`` table states the
  unit and its count), and ``mde``, the McNemar test's minimum detectable gap at n pairs, alpha
  and power 0.8 (:func:`medexp.detectors.answer_arms.effect_size`);
* per-stratum accuracies, gaps and McNemar p-values (the ``strata`` table);
* with ``reference_models`` (clean models asked the same probes): ``reference_gap.<name>``,
  their mean ``reference_gap``, and ``gap_difference`` = gap - reference_gap with its bootstrap
  interval (unit: pair) and ``p_reference``, over the model's pairs that every reference answered
  too (``n_reference_excluded_pairs`` left out). A twin set that is harder for every model gives every
  model a gap; the difference removes the shared part. Its test is a paired sign-flip test over
  pairs: per pair, the model's outcome difference (original - twin) minus the references' mean;
  under the null that the model is no more sensitive to a pair's perturbation than a clean model,
  the two are exchangeable within the pair, so that difference is symmetric about 0. A
  permutation test rather than a bootstrap test, because it holds its level exactly for any
  number of pairs (the bootstrap's is only asymptotic, and pairs are few: 440 and 478 in the
  published twins), and it needs no variance estimate of a difference of binary outcomes;
* with at least five reference models, ConStat's estimate (:mod:`medexp.stats.constat`, the twins
  as its reference benchmark, the originals as its benchmark): ``constat_expected``, the accuracy
  on the originals that the references' line (twin accuracy -> original accuracy) gives the
  model's twin accuracy, ``constat_inflation`` = acc_original - constat_expected with
  ``constat_ci_low``/``constat_ci_high`` (bootstrap over image-clustered pairs and reference
  models), ``constat_p_value`` (share of draws <= 0) and ``constat_n_references``, over the same
  common pairs; the ``constat`` table holds the fitted points. Descriptive: it changes neither
  ``p_value`` nor ``flag``.

``p_value`` is ``p_reference`` when references are given (the claim is then "drops more than
clean models"), else ``p_mcnemar``; ``statistic`` is correspondingly ``gap_difference`` or ``gap``.
Unpaired items (no twin, a skipped image) are counted in ``n_unpaired`` and by reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from medexp.benchmarks.skips import reason_metrics
from medexp.config.schemas import ControlKind, PerturbationGapConfig
from medexp.detectors.answer_arms import (
    Pairs,
    effect_size,
    example_images,
    joined,
    pair_frame,
    paired_statistics,
    pairs,
    skipped_metrics,
    skipped_table,
    status_counts,
    strata_table,
)
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.kernel.hashing import derive_seed
from medexp.probes.choice import ORIGINAL
from medexp.probes.twins import PERTURBED_TWIN
from medexp.stats.constat import MIN_REFERENCES
from medexp.stats.detector_power import ACCURACY_DIFFERENCE, PAIRED_ACCURACY, PowerFormula

ARMS = ((ORIGINAL, "original"), (PERTURBED_TWIN, "twin"))
# paired_statistics names the arms first/second (CR, PCR): here they are the original and its twin.
_ARM_NAMES = {"cr": "acc_original", "pcr": "acc_twin", "cr_ci_low": "acc_original_ci_low",
              "cr_ci_high": "acc_original_ci_high", "pcr_ci_low": "acc_twin_ci_low", "pcr_ci_high": "acc_twin_ci_high",
              "p_value": "p_mcnemar"}
_PAIR_COLUMNS = {"first_probe_id": "original_probe_id", "first_status": "original_status",
                 "first_choice": "original_choice", "first_correct": "original_correct",
                 "second_correct": "twin_correct", "second_errors": "twin_errors", "second_no_answer": "twin_no_answer",
                 "second_choices": "twin_choice"}


def perturbation_gap_detector(responses: pd.DataFrame, facts: pd.DataFrame, cfg, seed: int,
                              skipped: Sequence[tuple[str, str]] = (), unpaired: Sequence[tuple[str, str]] = (),
                              twin_ids: Mapping[str, str] | None = None,
                              references: Mapping[str, pd.DataFrame] | None = None) -> DetectorResult:
    """The perturbation gap of one model on one benchmark and its twin.

    ``responses``: the model's response table of the ``original`` and ``perturbed_twin`` probes;
    ``facts``: :func:`medexp.detectors.answer_arms.probe_facts` of those probes (with
    ``cfg.strata``); ``skipped``: pairs the probe maker could not ask; ``unpaired``: ``(example
    id, reason)`` of the items without a pair; ``twin_ids``: original example id -> twin example
    id (for the per-pair table); ``references``: response tables of clean models to the same
    probes, by model name; ``seed``: the cell's seed.
    """
    table = joined(responses, facts, (ORIGINAL, PERTURBED_TWIN))
    model_pairs = pairs(table, ORIGINAL, PERTURBED_TWIN)
    if model_pairs.n == 0:
        raise ValueError("perturbation_gap: no item has both an original and a perturbed_twin probe answered "
                         f"({model_pairs.excluded} pair(s) lack an answer)")
    values = {**paired_statistics(model_pairs, cfg.n_permutations, seed, cfg.ci_level),
              "n_excluded_pairs": float(model_pairs.excluded)}
    metrics = {_ARM_NAMES.get(name, name): value for name, value in values.items() if name not in ("delta", "phi")}
    outcomes = _outcomes(model_pairs)
    gap = _bootstrap_mean_difference(outcomes, cfg, derive_seed(seed, "perturbation_gap", "bootstrap"))
    metrics.update({"gap": gap["estimate"], "gap_ci_low": gap["low"], "gap_ci_high": gap["high"]})
    images = example_images(table, ORIGINAL, model_pairs.example_ids)
    effect, effect_table = effect_size(
        DECLARATION.power, outcomes[:, 0], outcomes[:, 1], images,
        cfg.alpha, derive_seed(seed, "perturbation_gap", "inflation"), cfg.ci_level, cfg.n_resamples)
    metrics.update(effect)
    per_pair = pair_frame(table, ORIGINAL, PERTURBED_TWIN, cfg.strata).rename(columns=_PAIR_COLUMNS)
    per_pair = per_pair.drop(columns=["n_second"])
    per_pair.insert(1, "twin_example_id", per_pair["example_id"].map(dict(twin_ids or {})))
    constat_table = None
    if references:
        against, constat_table = _against_references(model_pairs, outcomes, images, references, facts, cfg, seed,
                                                     per_pair)
        metrics.update(against)
        metrics["p_value"], metrics["statistic"] = metrics["p_reference"], metrics["gap_difference"]
    else:
        metrics["p_value"], metrics["statistic"] = metrics["p_mcnemar"], metrics["gap"]
    for kind, name in ARMS:
        metrics.update(status_counts(table, kind, name))
    metrics.update(skipped_metrics(skipped))
    metrics.update(reason_metrics("n_unpaired", [reason for _, reason in unpaired]))
    metrics.update({"n_examples": metrics["n_pairs"], "flag": float(metrics["p_value"] < cfg.alpha),
                    "n_references": float(len(references or {}))})
    strata = strata_table(table, ORIGINAL, PERTURBED_TWIN, cfg.strata, cfg.n_permutations, seed, cfg.ci_level)
    if not strata.empty:
        strata = strata.rename(columns=_ARM_NAMES).drop(columns=["delta", "phi"])
        strata.insert(2, "gap", strata["acc_original"] - strata["acc_twin"])
    tables = {
        "per_probe": table.assign(options=table["options"].map(lambda o: " | ".join(o) if isinstance(o, tuple) else None)),
        "strata": strata,
        "effect": effect_table,
        "skipped": skipped_table(skipped),
        "unpaired": pd.DataFrame(list(unpaired), columns=["example_id", "reason"]),
    }
    if constat_table is not None:
        tables["constat"] = constat_table
    return DetectorResult(metrics, per_pair, "per_pair", {"perturbation_gap": _figure(metrics, strata, cfg)}, tables)


def _outcomes(pairs_: Pairs) -> np.ndarray:
    """``(pairs, 2)``: right on the original, right on the twin (0/1)."""
    return np.column_stack([pairs_.first.astype(np.float64), pairs_.second_means()])


def _bootstrap_mean_difference(columns: np.ndarray, cfg, seed: int) -> dict[str, float]:
    """The mean of the per-pair column difference (column 0 - column 1) with its percentile
    bootstrap interval; the resampling unit is the pair (one row)."""
    from medexp.stats.bootstrap import cluster_bootstrap

    totals = np.column_stack([columns, np.ones(len(columns))])

    def mean_difference(summed: np.ndarray) -> dict[str, np.ndarray]:
        return {"gap": (summed[:, 0] - summed[:, 1]) / summed[:, 2]}

    interval = cluster_bootstrap(totals, mean_difference, cfg.n_resamples, seed, cfg.ci_level)["gap"]
    return {"estimate": interval.estimate, "low": interval.low, "high": interval.high}


def _against_references(model_pairs: Pairs, outcomes: np.ndarray, images: Sequence[str | None],
                        references: Mapping[str, pd.DataFrame], facts: pd.DataFrame, cfg, seed: int,
                        per_pair: pd.DataFrame) -> tuple[dict[str, float], pd.DataFrame | None]:
    """The reference models' gaps on the model's pairs, the difference of gaps and its test, and
    with at least :data:`~medexp.stats.constat.MIN_REFERENCES` references the ConStat estimate and
    its ``constat`` table (else None).

    Adds ``reference_gap`` (the references' mean per-pair difference) to ``per_pair``."""
    from medexp.stats.summaries import paired_mean_difference_test

    found = {}
    for name, responses in references.items():
        reference_pairs = pairs(joined(responses, facts, (ORIGINAL, PERTURBED_TWIN)), ORIGINAL, PERTURBED_TWIN)
        found[name] = dict(zip(reference_pairs.example_ids, _outcomes(reference_pairs)))
    # Only the pairs every reference answered: a reference's missing answer is no gap of 0.
    common = [index for index, example in enumerate(model_pairs.example_ids)
              if all(example in outcomes_ for outcomes_ in found.values())]
    if not common:
        raise ValueError(f"perturbation_gap: no pair answered by the model was answered by every reference model "
                         f"({sorted(found)})")
    examples = [model_pairs.example_ids[index] for index in common]
    model_difference = outcomes[common, 0] - outcomes[common, 1]
    out, per_reference = {"n_reference_excluded_pairs": float(model_pairs.n - len(common))}, []
    reference_outcomes = {}
    for name, outcomes_ in found.items():
        rows = reference_outcomes[name] = np.array([outcomes_[example] for example in examples])
        per_reference.append(rows[:, 0] - rows[:, 1])
        out[f"reference_gap.{name}"] = float(np.mean(per_reference[-1]))
    reference_difference = np.mean(per_reference, axis=0)
    per_pair["reference_gap"] = per_pair["example_id"].map(dict(zip(examples, reference_difference)))
    interval = _bootstrap_mean_difference(np.column_stack([model_difference, reference_difference]), cfg,
                              derive_seed(seed, "perturbation_gap", "reference-bootstrap"))
    test = paired_mean_difference_test(model_difference, reference_difference, cfg.n_permutations,
                                       derive_seed(seed, "perturbation_gap", "reference-signflip"))
    out.update({"reference_gap": float(reference_difference.mean()), "gap_difference": test.statistic,
                "gap_difference_ci_low": interval["low"], "gap_difference_ci_high": interval["high"],
                "p_reference": test.p_value})
    if len(reference_outcomes) < MIN_REFERENCES:
        return out, None
    estimate, table = _constat(outcomes[common], reference_outcomes, [images[index] for index in common], cfg, seed)
    out.update(estimate)
    return out, table


def _constat(candidate: np.ndarray, references: Mapping[str, np.ndarray], images: Sequence[str | None], cfg,
             seed: int) -> tuple[dict[str, float], pd.DataFrame]:
    """ConStat on the twins as reference benchmark: the accuracy on the originals a clean model of
    the candidate's twin accuracy reaches (a line fitted on the references), the candidate's excess
    over it with its interval over image-clustered pairs and reference models, and the table of
    the points the line is fitted on (one row per reference, then the candidate's)."""
    from medexp.stats.constat import constat_inflation

    result = constat_inflation(candidate, np.stack(list(references.values())), images, cfg.n_resamples,
                               derive_seed(seed, "perturbation_gap", "constat"), cfg.ci_level)
    rows = [{"model": name, "role": "reference", "acc_twin": float(values[:, 1].mean()),
             "acc_original": float(values[:, 0].mean())} for name, values in references.items()]
    rows.append({"model": "(cell's model)", "role": "candidate", "acc_twin": float(candidate[:, 1].mean()),
                 "acc_original": result.observed, "expected_original": result.expected,
                 "inflation": result.inflation, "ci_low": result.low, "ci_high": result.high,
                 "p_value": result.p_value, "slope": result.slope, "intercept": result.intercept,
                 "n_valid": result.n_valid, "n_resamples": result.n_resamples,
                 "resampling": f"{result.unit} ({result.n_clusters} clusters of {result.n_items} items) "
                               f"and reference models"})
    return result.metrics(), pd.DataFrame(rows)


def _figure(metrics: dict[str, float], strata: pd.DataFrame, cfg):
    """Accuracy on each arm (Wilson intervals) and the gap overall and per stratum."""
    from matplotlib.figure import Figure

    from medexp.detectors.answer_arms import proportion_bars

    figure = Figure(figsize=(10, 3.6), layout="constrained")
    left, right = figure.subplots(1, 2, width_ratios=[1, 2])
    proportion_bars(left, [("original", metrics["acc_original"], metrics["acc_original_ci_low"],
                            metrics["acc_original_ci_high"]),
                           ("perturbed twin", metrics["acc_twin"], metrics["acc_twin_ci_low"],
                            metrics["acc_twin_ci_high"])],
                    f"b = {metrics['b']:.0f}, c = {metrics['c']:.0f}, McNemar p = {metrics['p_mcnemar']:.3g}",
                    "accuracy (Wilson CI)")
    labels, gaps = ["all"], [metrics["gap"]]
    first = cfg.strata[0] if len(cfg.strata) else None
    if first is not None and not strata.empty:
        rows = strata[strata["field"] == first]
        labels += [str(value) for value in rows["value"]]
        gaps += list(rows["gap"])
    positions = np.arange(len(labels))
    right.bar(positions, gaps, color=["#C44E52"] + ["#4C72B0"] * (len(labels) - 1), alpha=0.85)
    right.errorbar([0], [metrics["gap"]], yerr=[[metrics["gap"] - metrics["gap_ci_low"]],
                                                [metrics["gap_ci_high"] - metrics["gap"]]],
                   color="black", capsize=4, fmt="none")
    if "reference_gap" in metrics:
        right.axhline(metrics["reference_gap"], color="#55A868", linestyle="--", linewidth=1,
                      label=f"clean references' gap ({metrics['reference_gap']:+.3f})")
        right.legend(fontsize=8)
    right.axhline(0.0, color="grey", linewidth=0.8)
    right.set_xticks(positions, labels, rotation=30 if len(labels) > 6 else 0, fontsize=8)
    right.set_ylabel("gap = acc original - acc twin")
    right.set_title(f"gap {metrics['gap']:+.3f} (bootstrap CI over pairs)"
                    + (f", by {first}" if len(labels) > 1 else ""), fontsize=10)
    return figure


DECLARATION = DetectorDeclaration(
    name="perturbation_gap",
    schema=PerturbationGapConfig,
    evaluator="medexp.evaluators.perturbation:perturbation_gap",
    probes="medexp.evaluators.perturbation:perturbation_probes",
    inputs=frozenset({Input.answers, Input.twin, Input.references}),
    controls=SCORING_CONTROLS - {ControlKind.blind_image, ControlKind.external_baseline},
    power=PowerFormula(PAIRED_ACCURACY, "one", "original/twin pairs", ACCURACY_DIFFERENCE,
                       "one-sided exact McNemar: original right more often than its twin"),
    power_count="medexp.evaluators.perturbation:twin_pairs",
    docs="docs/perturbation.md#detector-perturbation_gap",
    control_reasons={
        ControlKind.blind_image: "the twin differs from its original by its image; without images both arms ask the same question",
        ControlKind.external_baseline: "clean comparison models are named in detector.reference_models",
    },
)
