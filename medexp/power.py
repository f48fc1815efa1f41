"""``python -m medexp.power bench=<name> detector=<name> [effect=<x>] [power=0.8] [other overrides]``

Answers before any model runs what a benchmark can detect with a detector: loads the
benchmark as a cell would (no model), counts the detector's n (items, original/twin pairs,
members and non-members, or the shards the detector config cuts), and prints the minimum
detectable effect (MDE) at the detector's alpha (``detector.alpha``) and the requested power;
with ``effect=`` also the n that effect needs and whether the benchmark has it. The formulas
and their units are :mod:`medexp.stats.power`'s, chosen per detector kind by
:mod:`medexp.stats.power_table`. The kinds without a closed formula (mink_tail, topk_jaccard,
loss, image_nn, memorization) are answered by simulating their own test
(:mod:`medexp.detectors.power_simulation`, cached under ``paths.cache_dir``/power by
:mod:`medexp.evaluators.simulated_power`); a detector that tests nothing (composition_sweep)
exits non-zero with the reason.

Assumptions the command line can change:

- ``accuracy=`` and ``correlation=`` (defaults 0.5 and 0.5, as lmms-eval's power analysis):
  the arms' accuracy and the correlation of their per-item correctness, which set the paired
  difference's variance 2 p (1 - p) (1 - r) (paired accuracy detectors);
- ``chance=`` (text_only): the chance rate; default the mean of 1/k over the items' k options
  (detector.chance=prior tests against a higher rate, so the default is optimistic there);
- ``tail_rate=`` (mink_tail, default 0.01): the share of examples on which a clean model's Delta
  exceeds ``flag_threshold``.
"""

from __future__ import annotations

import sys
from typing import Sequence

from medexp.config.ranges import ConfigRangeError, Range

USAGE = """usage: python -m medexp.power bench=<name> detector=<name> [effect=<x>] [power=0.8]
                              [accuracy=0.5] [correlation=0.5] [chance=<p>] [tail_rate=0.01] [bench.<field>=<v> ...]

The minimum detectable effect of a detector on a benchmark, before any model runs; with effect=,
the items (or shards) that effect needs and whether this benchmark has enough.
Example: python -m medexp.power bench=vqa_rad bench.root=/data/VQA_RAD detector=option_order effect=0.05"""
ASSUMPTIONS = {"effect": None, "power": 0.8, "accuracy": 0.5, "correlation": 0.5, "chance": None, "tail_rate": None}
SIMULATION_ASSUMPTIONS = ("tail_rate",)  # options a simulated kind's model may take (an unknown one is refused)
_RATE = Range(0.0, 1.0, low_open=True, high_open=True)
# The options' ranges, checked on the command line; effect= also against its detector's scale (effect_scale).
OPTION_RANGES = {"effect": Range(0.0, low_open=True), "power": _RATE, "accuracy": _RATE,
                 "correlation": Range(-1.0, 1.0), "chance": _RATE, "tail_rate": _RATE}


def split_arguments(args: list[str]) -> tuple[list[str], dict[str, float | None]]:
    """Hydra overrides and the power options (``name=<number>``), each in its range."""
    overrides, options = [], dict(ASSUMPTIONS)
    for arg in args:
        name, _, value = arg.partition("=")
        if name in ASSUMPTIONS:
            try:
                options[name] = float(value)
            except ValueError:
                raise ValueError(f"{name} needs a number: {name}=<x>, got {arg!r}") from None
            _check_option(name, options[name], OPTION_RANGES[name])
        else:
            overrides.append(arg)
    return overrides, options


def _check_option(name: str, value: float, scale: Range, of_what: str = "") -> None:
    if not scale.holds(value):
        raise ConfigRangeError(f"{name}={value:g} is out of range{of_what}: allowed {scale.describe()}")


def effect_scale(cfg, kind: str) -> tuple[Range, str]:
    """The range a target effect of the detector lies in, and its unit: a share or a correlation
    cannot pass 1, an AUC's lift above 0.5 cannot pass 0.5, a top-K overlap cannot pass top_k;
    an effect in SDs (Cohen's d, a loss gap) has no upper end."""
    from medexp.detectors.power_simulation import SIMULATED_TESTS, simulated_kind, simulated_test
    from medexp.stats.power_table import ABOVE_CHANCE, AUC, PAIRED_ACCURACY, SPEARMAN, power_formula

    if kind in SIMULATED_TESTS:
        test = simulated_test(simulated_kind(kind, cfg.detector))
        if test.count_of:  # a share of the examples or images
            return Range(0.0, 1.0, low_open=True), test.effect_unit
        if test.count_of == "":  # a count, at most top_k
            return Range(0.0, float(cfg.detector.top_k), low_open=True), test.effect_unit
        return OPTION_RANGES["effect"], test.effect_unit
    formula = power_formula(kind)
    highest = {PAIRED_ACCURACY: (1.0, False), ABOVE_CHANCE: (1.0, True), AUC: (0.5, True), SPEARMAN: (1.0, True)}
    if formula.family not in highest:
        return OPTION_RANGES["effect"], formula.effect_unit
    high, high_open = highest[formula.family]
    return Range(0.0, high, low_open=True, high_open=high_open), formula.effect_unit


def answer(cfg, options: dict[str, float | None]) -> list[str]:
    """The lines printed for a composed config: what n is, the MDE and, with an effect, the n it needs."""
    from medexp.detectors.power_simulation import SIMULATED_TESTS
    from medexp.evaluators import detector_kind
    from medexp.stats import power as pw
    from medexp.stats.power_table import (
        ABOVE_CHANCE, AUC, ONE_SAMPLE_T, PAIRED_ACCURACY, SPEARMAN, TWO_SAMPLE_T, power_formula,
    )

    kind = detector_kind(cfg.detector)
    if options["effect"] is not None:
        scale, unit = effect_scale(cfg, kind)
        _check_option("effect", options["effect"], scale, f" for detector={cfg.detector.name} ({unit})")
    if kind in SIMULATED_TESTS:
        return simulated_answer(cfg, options, kind)
    formula = power_formula(kind)  # NoPowerFormula before any benchmark is loaded
    alpha, power, effect = float(cfg.detector.alpha), float(options["power"]), options["effect"]
    sided = formula.sided
    lines = [f"bench={cfg.bench.name} split={cfg.bench.split} detector={cfg.detector.name} (kind {kind})",
             f"test: {formula.test}", f"alpha={alpha:g} power={power:g} {sided}-sided"]
    benchmark = load_benchmark(cfg)
    examples = benchmark.examples
    if formula.family == PAIRED_ACCURACY:
        n = paired_n(cfg, kind, benchmark)
        variance = pw.paired_difference_variance(options["accuracy"], options["correlation"])
        lines.append(f"assumed: var(D) = 2 p (1-p) (1-r) = {variance:.4g} (accuracy p={options['accuracy']:g}, "
                     f"per-item correlation r={options['correlation']:g})")
        mde = pw.paired_accuracy_mde(n, alpha, power, variance, sided)
        needed = None if effect is None else pw.paired_accuracy_n(effect, alpha, power, variance, sided)
    elif formula.family == ABOVE_CHANCE:
        n = sum(example.options is not None for example in examples)
        chance = options["chance"] if options["chance"] is not None else uniform_chance(examples)
        lines.append(f"assumed: chance rate {chance:.4g}"
                     + ("" if options["chance"] is not None else " (mean 1/k over the items' options)"))
        mde = pw.above_chance_mde(n, chance, alpha, power, sided)
        needed = None if effect is None else pw.above_chance_n(effect, chance, alpha, power, sided)
    elif formula.family == AUC:
        nonmembers = len(load_benchmark(cfg, split=str(cfg.detector.nonmember_split)))
        n = len(examples) + nonmembers
        lines.append(f"members: {len(examples)} (split {cfg.bench.split}), non-members: {nonmembers} "
                     f"(split {cfg.detector.nonmember_split})"
                     + ("; a trained model's own partitions differ" if kind == "membership" else ""))
        mde = pw.auc_mde(len(examples), nonmembers, alpha, power, sided)
        needed = None if effect is None else pw.auc_n(effect, alpha, power, sided, positive_share=len(examples) / n)
    elif formula.family == SPEARMAN:
        n = len(examples)
        mde = pw.spearman_mde(n, alpha, power, sided)
        needed = None if effect is None else pw.spearman_n(effect, alpha, power, sided)
    elif formula.family == ONE_SAMPLE_T:
        n = int(cfg.detector.shards)
        if not 2 <= n <= len(examples):
            raise ValueError(f"exch needs 2 <= detector.shards <= number of examples ({len(examples)}), got {n}")
        lines.append(f"{len(examples)} examples cut into {n} shards")
        mde = pw.one_sample_t_mde(n, alpha, power, sided)
        needed = None if effect is None else pw.one_sample_t_n(effect, alpha, power, sided)
        if needed is not None and needed > len(examples):
            lines.append(f"{needed} shards need at least {needed} examples (one per shard)")
    elif formula.family == TWO_SAMPLE_T and kind == "overlap_gap":
        flagged, unflagged = overlap_images(cfg, benchmark)
        n = flagged + unflagged
        lines.append(f"images: {flagged} flagged, {unflagged} unflagged (detector.flag={cfg.detector.flag} of "
                     f"model={cfg.model.name}'s scores; an image's questions carry its flag)")
        mde = pw.two_sample_t_mde(flagged, unflagged, alpha, power, sided)
        needed = None if effect is None else pw.two_sample_t_n(effect, alpha, power, sided, first_share=flagged / n)
    elif formula.family == TWO_SAMPLE_T:
        from medexp.detectors.dataset_inference import scored_half_size

        nonmembers = len(load_benchmark(cfg, split=str(cfg.detector.nonmember_split)))
        tested_members, tested_nonmembers = scored_half_size(len(examples)), scored_half_size(nonmembers)
        n = tested_members + tested_nonmembers
        lines.append(f"members: {len(examples)} (split {cfg.bench.split}), non-members: {nonmembers} "
                     f"(split {cfg.detector.nonmember_split}); half B, the tested half: {tested_members} and "
                     f"{tested_nonmembers} (half A fits the model)")
        mde = pw.two_sample_t_mde(tested_members, tested_nonmembers, alpha, power, sided)
        needed = None if effect is None else pw.two_sample_t_n(effect, alpha, power, sided,
                                                               first_share=tested_members / n)
    else:
        raise NotImplementedError(f"no power computation for formula family {formula.family!r}")
    lines += [f"n: {n} {formula.n_unit}", f"MDE: {mde:.4g} {formula.effect_unit}"]
    if needed is not None:
        verdict = "enough" if needed <= n else f"not enough (short by {needed - n})"
        lines.append(f"effect {effect:g} needs n = {needed} {formula.n_unit}; this benchmark has {n}: {verdict}")
    return lines


def simulated_answer(cfg, options: dict[str, float | None], kind: str) -> list[str]:
    """The lines printed for a detector whose MDE is simulated (``medexp.detectors.power_simulation``),
    cached under ``paths.cache_dir``/power: n, the MDE and, with an effect, the n it needs."""
    import math

    from medexp.detectors.power_simulation import LARGEST_SCALE, assumptions_of, simulated_kind, simulated_test
    from medexp.evaluators.simulated_power import cached_simulated_mde, cached_simulated_n

    sizes, counted = simulated_sizes(cfg, kind)
    kind = simulated_kind(kind, cfg.detector)  # the detector's own test (topk_jaccard: its null)
    test = simulated_test(kind)
    alpha, power, effect = float(cfg.detector.alpha), float(options["power"]), options["effect"]
    assumptions = assumptions_of(kind, {name: options[name] for name in SIMULATION_ASSUMPTIONS if options[name] is not None})
    lines = [f"bench={cfg.bench.name} split={cfg.bench.split} detector={cfg.detector.name} (kind {kind})",
             f"test: {test.test}", f"alpha={alpha:g} power={power:g} one-sided", f"model: {test.model}"]
    if assumptions:
        lines.append("assumed: " + ", ".join(f"{name}={value:g}" for name, value in assumptions.items()))
    lines.append(f"n: {counted}")
    result = cached_simulated_mde(kind, sizes, alpha, power, cfg.paths.cache_dir, assumptions)
    permutations = f", {result.n_permutations} permutations per test" if test.permutation_test else ""
    how = (f"by simulation ({result.n_sim} draws{permutations}; estimated power at the MDE {result.power_at_mde:.2f}, "
           f"rejection rate at effect 0 {result.null_rate:.3f})")
    if math.isnan(result.mde):
        lines.append(f"MDE: none up to {test.largest(sizes):g} {test.effect_unit}, {how}")
    else:
        lines.append(f"MDE: {result.mde:.4g} {test.effect_unit}, {how}")
    if effect is not None:
        if test.lever is None:
            lines.append(f"effect {effect:g}: {test.not_the_lever}")
            return lines
        n = int(sizes[test.lever])
        needed = cached_simulated_n(kind, sizes, effect, alpha, power, cfg.paths.cache_dir, assumptions)
        if needed is None:
            lines.append(f"effect {effect:g} needs more than {LARGEST_SCALE * n} {test.lever_unit} (searched up to "
                         f"{LARGEST_SCALE} times this benchmark's {n}): not enough")
        else:
            verdict = "enough" if needed <= n else f"not enough (short by {needed - n})"
            lines.append(f"effect {effect:g} needs n = {needed} {test.lever_unit}; this benchmark has {n}: {verdict}")
    return lines


def simulated_sizes(cfg, kind: str) -> tuple[dict[str, float], str]:
    """The sizes a simulated kind's test runs on, counted from the benchmark and the detector config,
    and how they were counted (the ``n:`` line)."""
    from medexp.config.schemas import RankBy

    benchmark = load_benchmark(cfg)
    detector = cfg.detector
    if kind in ("mink_tail", "loss", "topk_jaccard"):
        from medexp.evaluators.cohort import listed_references

        references = list(listed_references(cfg))
        sizes = {"examples": len(benchmark), "models": 1 + len(references)}
        counted = (f"{len(benchmark)} examples; cohort: the target {cfg.model.name} and {len(references)} references "
                   f"({', '.join(references)}; external baselines a control adds are not counted)")
        if kind == "topk_jaccard":
            sizes.update(top_k=int(detector.top_k), rank_by_delta=int(RankBy(detector.rank_by) is RankBy.delta))
            counted += f"; top_k={detector.top_k}, rank_by={RankBy(detector.rank_by).value}"
        return sizes, counted
    if kind == "image_nn":
        from medexp.images.audit import load_corpus
        from medexp.images.store import distinct_images

        cache_dir = cfg.paths.cache_dir
        images = len(distinct_images([example.image for example in benchmark.examples if example.image is not None],
                                     cache_dir))
        corpus = load_corpus(detector.corpus, cache_dir)
        corpus_images = len(distinct_images([row.image for row in corpus.examples if row.image is not None], cache_dir))
        calibration = min(int(detector.calibration_size), corpus_images)
        counted = (f"{images} distinct benchmark images; calibration: {calibration} corpus images (calibration_size "
                   f"{detector.calibration_size}, corpus {detector.corpus.name} has {corpus_images} distinct images; "
                   f"a cell also merges images whose embeddings coincide), tau_alpha={detector.tau_alpha:g}")
        return {"images": images, "calibration": calibration, "tau_alpha": float(detector.tau_alpha)}, counted
    if kind == "memorization":
        nonmembers = len(load_benchmark(cfg, split=str(detector.nonmember_split)))
        counted = (f"{len(benchmark) + nonmembers} members and non-members: {len(benchmark)} members (split "
                   f"{cfg.bench.split}), {nonmembers} non-members (split {detector.nonmember_split}); a trained "
                   "candidate's own partitions differ")
        return {"members": len(benchmark), "nonmembers": nonmembers}, counted
    raise NotImplementedError(f"no simulated sizes for detector kind {kind!r}")


def overlap_images(cfg, benchmark) -> tuple[int, int]:
    """(flagged, unflagged) images of an overlap_gap cell: its questions' flags come from the cell
    model's scores (a record's flag column), its images from the benchmark (detector.image_field),
    each image's flag by the detector's own rule (:func:`medexp.stats.cluster_gap.image_flags`)."""
    from pathlib import Path

    from medexp.detectors.overlap_gap import example_flags
    from medexp.evaluators.context import CellContext
    from medexp.evaluators.overlap import example_clusters
    from medexp.stats.cluster_gap import image_flags
    from medexp.stats.inflation import cluster_index

    ctx = CellContext(cfg, 0, benchmark, list(benchmark.examples), Path(cfg.paths.cache_dir))
    scores = ctx.example_scores()
    flags = dict(zip(scores["example_id"], example_flags(scores, str(cfg.detector.flag))))
    clusters = example_clusters(ctx, cfg.detector)
    clusters = clusters[clusters["example_id"].isin(flags)]
    images = list(clusters["image"])
    image_flag = image_flags(clusters["example_id"].map(flags).to_numpy(dtype=bool),
                             cluster_index(images, len(images)), images)
    flagged = int(image_flag.sum())
    if flagged == 0 or flagged == image_flag.size:
        raise ValueError(f"detector=overlap_gap needs flagged and unflagged images; model={cfg.model.name}'s "
                         f"{cfg.detector.flag} flags {flagged} of {image_flag.size} images")
    return flagged, image_flag.size - flagged


def load_benchmark(cfg, split: str | None = None):
    """The bench (its ``split``, else its own) after its own filters and the skips for the fields the detector reads."""
    from omegaconf import OmegaConf

    from medexp.benchmarks import load_benchmark_from_config

    bench_cfg = cfg.bench
    if split is not None:
        bench_cfg = OmegaConf.merge(cfg.bench, {"split": split})
    from medexp.evaluators import cell_reads_pixels

    needs = OmegaConf.get_type(cfg.detector).example_fields
    # a cell that reads no image (records of scores) loads the bench from its annotations alone, as its run does
    return load_benchmark_from_config(bench_cfg, cfg.paths.cache_dir, needs, pixels=cell_reads_pixels(cfg))


def paired_n(cfg, kind: str, benchmark) -> int:
    """Items a paired detector compares: items with options (option_order), original/twin pairs
    (perturbation_gap), else every item."""
    if kind == "option_order":
        return sum(example.options is not None for example in benchmark.examples)
    if kind == "perturbation_gap":
        from medexp.benchmarks.twins import load_twin, pair_twins

        twins = load_twin(cfg.bench, cfg.paths.cache_dir)
        return len(pair_twins(benchmark.examples, benchmark.skipped, twins, cfg.bench.twin,
                              originals_complete=cfg.bench.max_examples is None, bench_name=str(cfg.bench.name)).pairs)
    return len(benchmark)


def uniform_chance(examples) -> float:
    rates = [1 / len(example.options) for example in examples if example.options]
    if not rates:
        raise ValueError("no item has options: text_only needs multiple-choice items")
    return sum(rates) / len(rates)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    from medexp.config.command_line import answer_command_line

    return answer_command_line("medexp.power", USAGE, argv, split_arguments,
                               {"bench": "the benchmark", "detector": "the detector"}, answer)


if __name__ == "__main__":
    sys.exit(main())
