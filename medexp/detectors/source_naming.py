"""Detector ``source_naming``: DIS-CO's question (Duarte et al., ICML 2025) in its medical form.

Every distinct image of the audited benchmark (``source_audited``) and of a control set of unseen
images of the same kind (``source_control``, another split of the benchmark) is asked which public
collection it comes from, the same collections listed in the same order for every image
(:mod:`medexp.probes.source`). A model that names the audited benchmark far more often on the
benchmark's own images than on unseen images of the same modality has seen those images under
the benchmark's name; a model that knows only what such images look like names both sets alike.

Per image: ``named_audited`` is whether the reply chose the audited benchmark's option. Only
answers are evidence: an ``error`` row (no reply) leaves every denominator and is counted
(``n_error_audited``, ``n_error_control``); a ``no_answer`` (a refusal, no option committed to)
counts as not naming.

Metrics: ``rate_audited`` and ``rate_control`` (``hits_<arm>`` / ``n_<arm>``: the share of each
arm's answered images named the audited benchmark, Wilson intervals, unit: image) and their
``difference``; ``accuracy_audited`` and ``accuracy_control`` (the true collection named);
``mh_difference``, the Mantel-Haenszel risk difference over the strata of ``match_by`` (the modality by default) with its interval
(:func:`medexp.stats.stratified.mantel_haenszel_difference`, Sato's variance); ``n_audited`` and
``n_control`` (answered images) and the images the test compares (``n_audited_tested``,
``n_control_tested``); status counts per arm; ``mde``, the rise in naming rate the test detects at
power 0.8 from a control rate of 1/k for k collections (``mde_control_rate``), the assumption
``python -m medexp.power`` states.

Why strata: the control is matched to the audited images by modality because a model's naming
depends on what an image looks like. A clean model that names every CT "the benchmark" and every
X-ray "none of these" shows a raw difference whenever the audited set holds more CTs than the
control; within a modality it does not. A stratum with images of one arm only compares nothing: it
leaves the test (``n_strata_dropped``, ``n_audited_dropped``, ``n_control_dropped``, a warning),
its images still counted in the raw rates.

p-value: one-sided, "the audited images are named the audited benchmark more often than the
control images of the same stratum": the exact conditional test of
:func:`medexp.stats.stratified.exact_stratified_greater` (each stratum's margins fixed, the
audited arm's namers hypergeometric under the null, their sum's law the strata's convolution).
Chosen over the Cochran-Mantel-Haenszel chi-square because strata of a few images are common (a
rare modality) and its normal approximation is poor there; and over a sampled permutation test
because, with margins fixed, the MH risk difference is an increasing function of the audited
namers' total, so this *is* the stratified permutation test of the MH difference, computed exactly:
no draws, nothing to seed, no p floor. With one stratum it is Fisher's exact test. The test is
exact, hence conservative at a discrete level: its false-positive rate stays at or below alpha.
``statistic`` is ``mh_difference`` (the difference the test orders by; the raw ``difference``
when there is one stratum); ``flag`` is p < alpha.

Tables: ``per_probe`` (one row per image: arm, status, choice, named_audited, the stratum, whether
it is in the test), ``strata`` (per stratum of the test, then per value of each ``strata`` field:
hits, rates with intervals, the difference and the stratum's own one-sided Fisher p), ``skipped``
(images the probe maker left out). Figure: the two rates with their intervals, overall and per
stratum of the test.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from medexp.answers.table import Status
from medexp.config.schemas import ControlKind, SourceNamingConfig
from medexp.detectors.answer_arms import joined, proportion_bars, skipped_metrics, skipped_table, status_counts
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.probes.source import SOURCE_AUDITED, SOURCE_CONTROL
from medexp.stats.detector_power import TWO_PROPORTIONS, PowerFormula, detector_mde
from medexp.stats.paired import wilson_interval
from medexp.stats.stratified import exact_stratified_greater, mantel_haenszel_difference

ARMS = ((SOURCE_AUDITED, "audited"), (SOURCE_CONTROL, "control"))
MATCHED = "matched_on"  # the per-probe column naming the stratum of the test
# What arm_rates gives, in the order of the strata table.
RATE_COLUMNS = [*(column for _, name in ARMS for column in (
    f"n_{name}", f"hits_{name}", f"rate_{name}", f"rate_{name}_ci_low", f"rate_{name}_ci_high")), "difference"]


def source_naming_detector(responses: pd.DataFrame, facts: pd.DataFrame, cfg, seed: int,
                           skipped: Sequence[tuple[str, str]] = ()) -> DetectorResult:
    """Source naming of one model on one benchmark and its control images.

    ``responses``: the judged table of the ``source_audited`` and ``source_control`` probes;
    ``facts``: :func:`medexp.detectors.answer_arms.probe_facts` of the same probes with the fields
    of ``cfg.match_by`` and ``cfg.strata``; ``skipped``: the probe maker's skips. ``seed`` is
    unused: the test is exact and draws nothing.
    """
    table = per_probe_table(joined(responses, facts, [kind for kind, _ in ARMS]), list(cfg.match_by),
                            list(cfg.strata))
    answered = table[table["status"] != Status.error.value]
    matched = stratum_counts(answered, MATCHED, cfg.ci_level)
    tested = matched[matched["in_test"]]
    if tested.empty:
        raise ValueError(f"source_naming: no stratum of {list(cfg.match_by)} holds answered images of both arms "
                         f"({(answered['arm'] == 'audited').sum()} audited, {(answered['arm'] == 'control').sum()} "
                         "control answered images)")
    table["in_test"] = table[MATCHED].isin(tested["value"]) & (table["status"] != Status.error.value)
    counts = [tested[column].to_numpy() for column in ("hits_audited", "n_audited", "hits_control", "n_control")]
    p_value = exact_stratified_greater(*counts)
    mh = mantel_haenszel_difference(*counts, confidence=cfg.ci_level)
    overall = arm_rates(answered, cfg.ci_level)
    n_options = int(table["n_options"].iloc[0])
    n_audited_tested, n_control_tested = int(tested["n_audited"].sum()), int(tested["n_control"].sum())
    metrics = {
        **overall,
        "accuracy_audited": _accuracy(answered, "audited"), "accuracy_control": _accuracy(answered, "control"),
        "mh_difference": mh.estimate, "mh_difference_ci_low": mh.low, "mh_difference_ci_high": mh.high,
        "p_value": p_value, "statistic": mh.estimate, "flag": float(p_value < cfg.alpha),
        "n_examples": float(n_audited_tested + n_control_tested),
        "n_audited_tested": float(n_audited_tested), "n_control_tested": float(n_control_tested),
        "n_strata": float(len(tested)), "n_strata_dropped": float(len(matched) - len(tested)),
        "n_audited_dropped": float(overall["n_audited"] - n_audited_tested),
        "n_control_dropped": float(overall["n_control"] - n_control_tested),
        "mde": detector_mde(DECLARATION.power, n_audited_tested, cfg.alpha, chance=1 / n_options,
                            n_negative=n_control_tested),
        "mde_control_rate": 1 / n_options,
    }
    for kind, name in ARMS:
        metrics.update(status_counts(table, kind, name))
    metrics.update(skipped_metrics(skipped))
    warnings = []
    if metrics["n_strata_dropped"]:
        warnings.append(f"{metrics['n_strata_dropped']:.0f} stratum(s) of {list(cfg.match_by)} hold answered images "
                        f"of one arm only: their {metrics['n_audited_dropped']:.0f} audited and "
                        f"{metrics['n_control_dropped']:.0f} control images leave the test")
    strata = pd.concat([matched.assign(field=MATCHED), *(
        stratum_counts(answered, f"stratum.{name}", cfg.ci_level).assign(field=name, in_test=None)
        for name in _breakdown_fields(cfg))], ignore_index=True)
    strata = strata[["field", *(column for column in strata.columns if column != "field")]]
    tables = {"strata": strata, "skipped": skipped_table(skipped)}
    return DetectorResult(metrics, table.drop(columns=["options"]), "per_probe",
                          {"source_naming": _figure(metrics, matched)}, tables, warnings=warnings)


def per_probe_table(table: pd.DataFrame, match_by: Sequence[str], strata: Sequence[str]) -> pd.DataFrame:
    """The joined rows with their arm, whether the audited benchmark was named and the stratum of
    the test (``matched_on``: ``field=value`` of each ``match_by`` field, "all" without any)."""
    missing = [name for name in dict.fromkeys([*match_by, *strata]) if f"stratum.{name}" not in table.columns]
    if missing:
        raise ValueError(f"source_naming: the probe facts lack the fields {missing}; build them with "
                         "probe_facts(probes, [*match_by, *strata])")
    audited_letters = set(table.loc[table["kind"] == SOURCE_AUDITED, "gold"])
    if len(audited_letters) != 1:
        raise ValueError(f"source_naming: the audited images' gold letters differ ({sorted(audited_letters)}): "
                         "every image must be asked the same collections")
    (audited_letter,) = audited_letters
    out = table.assign(
        arm=table["kind"].map(dict(ARMS)),
        named_audited=(table["status"] == Status.ok.value) & (table["choice"] == audited_letter),
    )
    if match_by:
        out[MATCHED] = [" | ".join(f"{name}={value}" for name, value in zip(match_by, values))
                        for values in zip(*(out[f"stratum.{name}"] for name in match_by))]
    else:
        out[MATCHED] = "all"
    return out


def arm_rates(rows: pd.DataFrame, ci_level: float) -> dict[str, float]:
    """Per arm over ``rows`` (answered images): ``n_<arm>`` images, ``hits_<arm>`` of them named the
    audited benchmark, ``rate_<arm>`` = hits / n with its Wilson interval; and ``difference``
    (audited rate minus control rate)."""
    out = {}
    for _, name in ARMS:
        hits = rows.loc[rows["arm"] == name, "named_audited"]
        rate = wilson_interval(int(hits.sum()), len(hits), ci_level)
        out.update({f"n_{name}": float(rate.n), f"hits_{name}": float(rate.k), f"rate_{name}": rate.estimate,
                    f"rate_{name}_ci_low": rate.low, f"rate_{name}_ci_high": rate.high})
    out["difference"] = out["rate_audited"] - out["rate_control"]
    return out


def stratum_counts(answered: pd.DataFrame, column: str, ci_level: float) -> pd.DataFrame:
    """Per value of ``column``: :func:`arm_rates`, ``in_test`` (both arms answered) and the
    stratum's own one-sided Fisher p (NaN with one arm)."""
    rows = []
    for value, group in answered.groupby(column, sort=True):
        rates = arm_rates(group, ci_level)
        in_test = rates["n_audited"] > 0 and rates["n_control"] > 0
        p_value = exact_stratified_greater(rates["hits_audited"], rates["n_audited"], rates["hits_control"],
                                           rates["n_control"]) if in_test else float("nan")
        rows.append({"value": value, **rates, "p_value": p_value, "in_test": in_test})
    return pd.DataFrame(rows, columns=["value", *RATE_COLUMNS, "p_value", "in_test"])


def _accuracy(answered: pd.DataFrame, arm: str) -> float:
    """The share of an arm's answered images whose true collection was named."""
    correct = answered.loc[answered["arm"] == arm, "correct"]
    return float(correct.mean()) if len(correct) else float("nan")


def _breakdown_fields(cfg) -> list[str]:
    """The ``strata`` fields, but for a single ``match_by`` field the test's strata already show."""
    return [name for name in cfg.strata if list(cfg.match_by) != [name]]


def _figure(metrics: dict[str, float], matched: pd.DataFrame):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 3.6), layout="constrained")
    left, right = figure.subplots(1, 2, width_ratios=[1, 2])
    proportion_bars(left, [(name, metrics[f"rate_{name}"], metrics[f"rate_{name}_ci_low"],
                            metrics[f"rate_{name}_ci_high"]) for _, name in ARMS],
                    f"MH difference = {metrics['mh_difference']:+.3f}, p = {metrics['p_value']:.3g}",
                    "audited benchmark named (Wilson CI)", (metrics["mde_control_rate"], "1/k"))
    positions = np.arange(len(matched))
    width = 0.38
    for offset, (_, name), color in ((-0.5, ARMS[0], "#C44E52"), (0.5, ARMS[1], "#4C72B0")):
        rates = matched[f"rate_{name}"].to_numpy(dtype=float)
        errors = np.vstack([np.nan_to_num(rates - matched[f"rate_{name}_ci_low"].to_numpy(dtype=float)),
                            np.nan_to_num(matched[f"rate_{name}_ci_high"].to_numpy(dtype=float) - rates)])
        right.bar(positions + offset * width, np.nan_to_num(rates), width, yerr=errors, capsize=3, color=color,
                  label=name)
    labels = [value if in_test else f"{value}\n(one arm)" for value, in_test in zip(matched["value"], matched["in_test"])]
    right.set_xticks(positions, labels, fontsize=8)
    right.set_ylim(0, 1.05)
    right.set_ylabel("audited benchmark named")
    right.set_title("per stratum of the test", fontsize=10)
    right.legend(fontsize=8)
    return figure


DECLARATION = DetectorDeclaration(
    name="source_naming",
    schema=SourceNamingConfig,
    evaluator="medexp.evaluators.source_naming:source_naming",
    probes="medexp.evaluators.source_naming:source_naming_probes",
    inputs=frozenset({Input.answers}),
    controls=SCORING_CONTROLS - {ControlKind.blind_image, ControlKind.order_answer_len, ControlKind.order_mink},
    power=PowerFormula(TWO_PROPORTIONS, "one", "images (audited and control)",
                       "naming-rate difference (fraction; 0.1 = 10 points)",
                       "one-sided exact stratified test: audited images named the benchmark more often than control "
                       "images of the same stratum"),
    power_count="medexp.evaluators.source_naming:audited_and_control_images",
    docs="docs/probes.md#source_naming-which-collection-an-image-comes-from",
    control_reasons={
        ControlKind.blind_image: "source_naming asks about the images themselves: without them there is nothing to name",
        ControlKind.order_answer_len: "it orders by teacher-forced token counts, and the order plays no part in a "
                                      "naming rate",
        ControlKind.order_mink: "it orders by teacher-forced Min-K%++ scores, and the order plays no part in a "
                                "naming rate",
    },
)
