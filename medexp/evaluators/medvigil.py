"""Evaluator of the ``medvigil`` detector: the evidence-perturbation probes of the cell's
benchmark, the model's answers (white box, OpenAI-compatible server or an imported harness
JSONL, cached), then the metrics of :mod:`medexp.detectors.medvigil`.

Probes: on the MedVIGIL release (``bench.format: medvigil``) the probes it ships, whose
``release_probe_id`` lets an imported harness file find them, plus the blur sweep and no-image
ablation of its original probes (when ``detector.kinds`` names blur / no_image); on any other
benchmark, the evidence probes made from the examples' regions of interest
(:mod:`medexp.probes.evidence`). With imported responses, the ablation probes the file does not
answer are skipped and counted (the public harness runs no blur sweep), never error rows that
would read as a model failing to see a blurred image.
Both are drawn from the model-independent probe seed, so every model of a grid answers the same
options in the same letters and their cells compare probe for probe.

The result is descriptive: MCS and its parts are estimates with case-clustered intervals, not a
test, so no p-value is logged (two models are compared by
:func:`medexp.detectors.medvigil_compare.paired_difference`). The cell also logs the released
wording's ``inflation`` (original minus paraphrase accuracy) with its interval and its ``mde`` at
``detector.alpha`` (:func:`medexp.detectors.medvigil.wording_inflation`).
"""

from __future__ import annotations

from typing import Any, Mapping

from medexp.config.schemas import ModelFamily
from medexp.detectors.base import DetectorResult
from medexp.evaluators.answering import answers, gated, probe_seed, require_probes, with_answer_counts
from medexp.evaluators.context import CellContext

PROBE_IMAGE_STORE = "probe_images"  # under the cache: derived probe images, content-addressed


def medvigil(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.medvigil import evaluate_medvigil, probe_facts

    from medexp.answers.imported import export_manifest

    probe_set = medvigil_probe_set(ctx)
    model = ctx.cfg.model
    # A harness run on the release asks no blur sweep; replies to an export answer every probe it holds.
    if ModelFamily(model.family) is ModelFamily.responses and model.responses_path and export_manifest(model) is None:
        probe_set = unanswered_ablations_skipped(probe_set, model.responses_path, model.responses_no_image_path,
                                                 model.responses_format)
    require_probes(ctx, probe_set)
    judged = answers(ctx, probe_set.probes, probe_set.skipped)
    counts = gated(ctx, judged)
    evaluated = evaluate_medvigil(judged.table, probe_facts(probe_set.probes), ctx.seed, ctx.cfg.detector.n_resamples,
                                  ctx.cfg.detector.alpha)
    return with_answer_counts(medvigil_result(evaluated, str(ctx.cfg.model.name), probe_set.skipped), counts)


def medvigil_probe_set(ctx: CellContext):
    """The release's probes (benchmark format medvigil) or the evidence probes of the cell's
    examples, in the fixed or rotated letters ``detector.rotate`` asks for."""
    from dataclasses import replace

    from medexp.config.schemas import BenchFormat

    detector, seed = ctx.cfg.detector, probe_seed(ctx)
    if BenchFormat(ctx.cfg.bench.format) is BenchFormat.medvigil:
        from medexp.benchmarks.hub import dataset_root
        from medexp.benchmarks.medvigil import HUB_FILES
        from medexp.probes.base import RELEASE_ID_KEY
        from medexp.probes.medvigil_release import (
            read_release_probes,
            release_sweep_probes,
            rotated_release_probes,
        )

        root = dataset_root(ctx.cfg.bench, ctx.cache_dir, list(HUB_FILES))
        probe_set = read_release_probes(ctx.benchmark, root, bool(ctx.cfg.bench.allow_outside_root))
        # A control may have chosen a subset of the cases: only theirs are asked, the others' probes
        # are skipped (by release id, so an imported harness file's lines for them are set aside).
        chosen = {example.example_id for example in ctx.examples}
        probes = [probe for probe in probe_set.probes if probe.example_id in chosen]
        unchosen = [(probe.meta[RELEASE_ID_KEY], f"not chosen: case {probe.example_id} is not among the control's examples")
                    for probe in probe_set.probes if probe.example_id not in chosen]
        if detector.rotate:
            probes = rotated_release_probes(probes, seed)
        sigmas = tuple(detector.sigmas) if "blur" in detector.kinds else ()
        probes += release_sweep_probes(probes, ctx.cache_dir / PROBE_IMAGE_STORE, sigmas, "no_image" in detector.kinds)
        return replace(probe_set, probes=probes, skipped=[*probe_set.skipped, *unchosen])
    from medexp.probes.evidence import EvidenceSettings, evidence_probes

    settings = EvidenceSettings(
        seed=seed, store=ctx.cache_dir / PROBE_IMAGE_STORE, rotate=bool(detector.rotate),
        kinds=tuple(detector.kinds), sigmas=tuple(detector.sigmas),
        tiers={field: dict(values) for field, values in detector.tiers.items()} or None,
        roi_labels=tuple(detector.roi_labels) if detector.roi_labels is not None else None,
    )
    # Distractors come from every released answer, not the control's subset, so a probe's
    # options do not depend on the control.
    pool = [example.answer for example in ctx.benchmark.examples]
    return evidence_probes(ctx.examples, pool, settings)


def unanswered_ablations_skipped(probe_set, responses_path, no_image_path=None, fmt="medexp"):
    """The probe set with the blur and no-image probes that the imported files do not answer
    moved to its skipped probes (by release id where the probe has one, as the file names it; a
    no-image file names a no_image probe by its original's id)."""
    from dataclasses import replace

    from medexp.answers.imported import imported_probe_ids, no_image_source
    from medexp.probes.base import RELEASE_ID_KEY
    from medexp.probes.evidence import is_ablation

    answered = imported_probe_ids(responses_path, fmt, probe_set.probes)
    answered_blind = imported_probe_ids(no_image_path, fmt, probe_set.probes) if no_image_path else set()
    kept, unanswered = [], []
    for probe in probe_set.probes:
        ids = {probe.probe_id, probe.meta.get(RELEASE_ID_KEY, probe.probe_id)}
        if is_ablation(probe.kind) and not ids & answered and no_image_source(probe) not in answered_blind:
            unanswered.append((probe.meta.get(RELEASE_ID_KEY, probe.probe_id),
                               "ablation not imported: the responses file does not answer this blur / no-image probe"))
        else:
            kept.append(probe)
    return replace(probe_set, probes=kept, skipped=[*probe_set.skipped, *unanswered])


def medvigil_result(evaluated: Mapping[str, Any], model: str, skipped) -> DetectorResult:
    """The cell's result from :func:`evaluate_medvigil`'s output: its metrics plus the skipped
    counts, the per-probe table, every metric table, the skipped probes, and the cell's figures."""
    from medexp.detectors.answer_arms import skipped_probe_metrics, skipped_table

    tables = dict(evaluated["tables"])
    per_probe = tables.pop("per_probe")
    metrics = {**evaluated["metrics"], **skipped_probe_metrics(skipped)}
    extra = {f"medvigil_{name}": frame for name, frame in tables.items()}
    extra["medvigil_skipped"] = skipped_table(skipped)
    return DetectorResult(metrics, per_probe, "per_probe", cell_figures(metrics, model), extra, descriptive=True)


def cell_figures(metrics: Mapping[str, float], model: str) -> dict[str, Any]:
    """The MCS components and the tier heatmap (one row per error convention), and the blur decay
    curves when the probe set has a blur sweep."""
    from medexp.detectors.medvigil_figures import medvigil_figures

    return {f"medvigil/{name}": figure for name, figure in medvigil_figures({model: metrics}, model).items()}
