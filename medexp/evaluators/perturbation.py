"""Evaluator of paired semantic perturbation: the cell's benchmark paired with its perturbed twin
(the bench's ``twin:`` section, loaded with the cell's inputs), both arms answered by the cell's
model and by each clean reference model (white box, OpenAI-compatible server or imported file,
cached), then the pure detector."""

from __future__ import annotations

import logging

from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import PowerCount
from medexp.evaluators.answering import answers, gated, other_model_answers, with_answer_counts
from medexp.evaluators.context import CellContext
from medexp.stats.constat import MIN_REFERENCES

log = logging.getLogger("medexp")


def perturbation_gap(ctx: CellContext) -> DetectorResult:
    from medexp.config import listed_model_configs
    from medexp.detectors.answer_arms import probe_facts
    from medexp.detectors.perturbation_gap import perturbation_gap_detector

    pairing = _pairing(ctx)
    probe_set = perturbation_probes(ctx, pairing)
    detector = ctx.cfg.detector
    judged = answers(ctx, probe_set.probes)
    counts = [gated(ctx, judged)]
    references = {}
    for reference in listed_model_configs(detector.reference_models, str(ctx.cfg.model.name),
                                          "detector.reference_models").values():
        name = str(reference.name)
        answered = other_model_answers(ctx, reference, probe_set.probes)
        references[name] = answered.table
        counts.append(gated(ctx, answered, f"reference model={name}", f"reference.{name}."))
    if len(references) < MIN_REFERENCES:
        log.info("perturbation_gap: no ConStat estimate: it fits the clean models' twin -> original accuracy "
                 "line on at least %d reference models, and detector.reference_models gives %d", MIN_REFERENCES,
                 len(references))
    result = perturbation_gap_detector(
        judged.table, probe_facts(probe_set.probes, list(detector.strata)), detector, ctx.seed,
        probe_set.skipped, pairing.unpaired,
        {original.example_id: twin.example_id for original, twin in pairing.pairs}, references)
    return with_answer_counts(result, *counts)


def _pairing(ctx: CellContext):
    """The cell's examples paired with their twins (the unpaired ones counted by reason)."""
    from medexp.benchmarks.twins import pair_twins

    bench = ctx.cfg.bench
    return pair_twins(ctx.examples, ctx.benchmark.skipped, ctx.twin, bench.twin,
                      originals_complete=bench.max_examples is None, bench_name=str(bench.name))


def perturbation_probes(ctx: CellContext, pairing=None):
    """Each original and its twin, asked alike; refused when no pair could be asked."""
    from medexp.probes.twins import twin_probes

    probe_set = twin_probes((pairing or _pairing(ctx)).pairs)
    if not probe_set.probes:
        raise ValueError(f"detector=perturbation_gap: no pair of bench={ctx.cfg.bench.name} could be asked "
                         f"(skipped: {probe_set.skip_counts()})")
    return probe_set


def twin_pairs(cfg, load) -> PowerCount:
    """``python -m medexp.power``'s count for perturbation_gap: the original/twin pairs."""
    from medexp.benchmarks.twins import load_twin, pair_twins

    benchmark = load()
    twins = load_twin(cfg.bench, cfg.paths.cache_dir)
    pairs = pair_twins(benchmark.examples, benchmark.skipped, twins, cfg.bench.twin,
                       originals_complete=cfg.bench.max_examples is None, bench_name=str(cfg.bench.name)).pairs
    return PowerCount(n=len(pairs))
