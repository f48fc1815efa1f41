"""Evaluators of the overlap gaps: the cell's flags (its flag source's table, loaded with the cell's
inputs), each example's image and strata, and the cell model's per-example scores (scored, or
read from a record) or answers (white box, server, imported file), with the baseline's."""

from __future__ import annotations

import pandas as pd

from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import PowerCount
from medexp.evaluators.context import CellContext
from medexp.evaluators.flag_sources import FlagTable, example_image
from medexp.probes.sets import ProbeSet


def overlap_gap(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.overlap_gap import overlap_gap_detector

    detector = ctx.cfg.detector
    baseline_cfg = _baseline(ctx)
    baseline = None if baseline_cfg is None else ctx.example_scores(model_cfg=baseline_cfg)
    result = overlap_gap_detector(ctx.example_scores(), cell_flags(ctx).flags(), example_clusters(ctx, detector),
                                  detector, ctx.seed, baseline)
    return with_flags(result, cell_flags(ctx))


def overlap_gap_answers(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.overlap_gap_answers import overlap_gap_answers_detector
    from medexp.evaluators.answering import answers, gated, other_model_answers, require_probes, with_answer_counts

    detector = ctx.cfg.detector
    probe_set = answer_probe_set(ctx)
    require_probes(ctx, probe_set)
    judged = answers(ctx, probe_set.probes, probe_set.skipped)
    counts = [gated(ctx, judged)]
    baseline_cfg, baseline = _baseline(ctx), None
    if baseline_cfg is not None:
        answered = other_model_answers(ctx, baseline_cfg, probe_set.probes)
        baseline = answered.table
        counts.append(gated(ctx, answered, f"baseline model={baseline_cfg.name}", "baseline."))
    flags = cell_flags(ctx).flags()
    result = overlap_gap_answers_detector(judged.table, flags, example_clusters(ctx, detector), detector, ctx.seed,
                                          baseline)
    result.metrics["n_skipped_probes"] = float(len(probe_set.skipped))
    counts.append(_no_answers_by_flag(judged.table, flags))
    return with_flags(with_answer_counts(result, *counts), cell_flags(ctx))


def _no_answers_by_flag(table: pd.DataFrame, flags: pd.DataFrame):
    """The no-answers of the flagged and the unflagged questions (``n_no_answer.flagged``,
    ``n_no_answer.unflagged``), and a warning when their rates differ beyond chance."""
    from medexp.answers.judges.base import Verdict
    from medexp.answers.judges.stage import no_answer_difference
    from medexp.evaluators.answering import AnswerCounts

    flagged = table["example_id"].map(flags.set_index("example_id")["flagged"]).fillna(False).astype(bool)
    groups = {"unflagged": table.loc[~flagged, "verdict"], "flagged": table.loc[flagged, "verdict"]}
    metrics, warnings = no_answer_difference(groups, "flag groups")
    metrics.update({f"n_no_answer.{name}": float((verdicts == Verdict.no_answer.value).sum())
                    for name, verdicts in groups.items()})
    return AnswerCounts(metrics, warnings, {})


def answer_probe_set(ctx: CellContext) -> ProbeSet:
    """The overlap gap's probes: every example of the cell asked once as released (its options, or
    open for the gold text), whatever its flag, so every flag source of a model shares one set of
    answers; an example that cannot be asked is skipped with its reason."""
    from medexp.probes.choice import ORIGINAL, collect_probes
    from medexp.probes.twins import question_probe

    return collect_probes(ctx.examples, lambda example: [question_probe(example)],
                          lambda example: f"{example.example_id}::{ORIGINAL}")


def cell_flags(ctx: CellContext) -> FlagTable:
    """The cell's flag table (loaded with its inputs; read here for a context made without them)."""
    if ctx.flags is None:
        from medexp.evaluators.flag_sources import load_flags

        ctx.flags = load_flags(ctx.cfg, ctx.benchmark, ctx.cache_dir)
    return ctx.flags


def with_flags(result: DetectorResult, flags: FlagTable) -> DetectorResult:
    """``result`` with its flag source's counts (questions and images judged and flagged), warnings and table."""
    result.metrics.update(flags.metrics())
    result.warnings.extend(flags.warnings)
    result.extra_tables["flags"] = flags.table
    return result


def _baseline(ctx: CellContext):
    from medexp.config import listed_model_config

    detector = ctx.cfg.detector
    if not detector.baseline:
        return None
    if str(detector.baseline) == str(ctx.cfg.model.name):
        raise ValueError(f"detector.baseline={detector.baseline} is the cell's own model")
    return listed_model_config(str(detector.baseline))


def example_clusters(ctx: CellContext, detector) -> pd.DataFrame:
    """Per example: its image as released (:func:`~medexp.evaluators.flag_sources.example_image` by
    ``detector.image_field``; None: a cluster of its own), so a control that hides the images
    (blind_image) keeps the clusters, and its strata fields."""
    released = {example.example_id: example_image(example, str(detector.image_field))
                for example in ctx.benchmark.examples}
    rows = [{"example_id": example.example_id, "image": released.get(example.example_id),
             **{name: example.meta.get(name) for name in detector.strata}} for example in ctx.examples]
    return pd.DataFrame(rows, columns=["example_id", "image", *detector.strata])


def flagged_images(cfg, load) -> PowerCount:
    """``python -m medexp.power``'s count for the overlap gaps: the flagged and unflagged images of
    the benchmark, as its flag source judges them (an image's questions carry its flag, by the
    detector's own rule, :func:`medexp.stats.cluster_gap.image_flags`)."""
    from medexp.evaluators.flag_sources import load_flags
    from medexp.stats.cluster_gap import image_flags
    from medexp.stats.inflation import cluster_index

    benchmark = load()
    flags = load_flags(cfg, benchmark, cfg.paths.cache_dir).table
    images = list(flags["image"])
    image_flag = image_flags(flags["flagged"].to_numpy(dtype=bool), cluster_index(images, len(images)), images)
    flagged = int(image_flag.sum())
    from medexp.config.schemas import FlagSourceKind

    source = f"flag source {cfg.detector.flags.name}"
    if flagged == 0 or flagged == image_flag.size:
        raise ValueError(f"detector={cfg.detector.name} needs flagged and unflagged images; {source} flags {flagged} "
                         f"of {image_flag.size} images")
    return PowerCount(n=int(image_flag.size), first=flagged, lines=(
        f"images: {flagged} flagged, {image_flag.size - flagged} unflagged ({source}, kind "
        f"{FlagSourceKind(cfg.detector.flags.kind).value}; an image's questions carry its flag)",))
