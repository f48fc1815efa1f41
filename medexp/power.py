"""``python -m medexp.power bench=<name> detector=<name> [effect=<x>] [power=0.8] [other overrides]``

Answers before any model runs what a benchmark can detect with a detector: loads the
benchmark as a cell would (no model), counts the detector's n (items, original/twin pairs,
members and non-members, or the shards the detector config cuts), and prints the minimum
detectable effect (MDE) at the detector's alpha (``detector.alpha``) and the requested power;
with ``effect=`` also the n that effect needs and whether the benchmark has it. The formulas
and their units are :mod:`medexp.stats.sample_size`'s; the detector's declaration
(:mod:`medexp.detectors.declaration`) names its formula and how its n is counted. Detectors
without a closed formula are answered by simulating their own test
(:mod:`medexp.detectors.power_simulation`, cached under ``paths.cache_dir``/power by
:mod:`medexp.evaluators.simulated_power_cache`); a detector that tests nothing exits non-zero with the
reason.

Assumptions the command line can change:

- ``accuracy=`` and ``correlation=`` (defaults 0.5 and 0.5, as lmms-eval's power analysis):
  the arms' accuracy and the correlation of their per-item correctness, which set the paired
  difference's variance 2 p (1 - p) (1 - r) (paired accuracy detectors);
- ``chance=`` (text_only): the chance rate; default the mean of 1/k over the items' k options
  (detector.chance=prior tests against a higher rate, so the default is optimistic there);
  (source_naming): the control images' naming rate; default 1/k for k collections, a model naming
  one at random;
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


def effect_scale(cfg, declaration) -> tuple[Range, str]:
    """The range a target effect of the detector lies in, and its unit: a share or a correlation
    cannot pass 1, an AUC's lift above 0.5 cannot pass 0.5, a top-K overlap cannot pass top_k;
    an effect in SDs (Cohen's d, a loss gap) has no upper end."""
    from medexp.detectors.declaration import Simulated
    from medexp.detectors.power_simulation import simulated_kind, simulated_test
    from medexp.stats.detector_power import ABOVE_CHANCE, AUC, PAIRED_ACCURACY, SPEARMAN, TWO_PROPORTIONS

    if isinstance(declaration.power, Simulated):
        test = simulated_test(simulated_kind(declaration.name, cfg.detector))
        if test.count_of:  # a share of the examples or images
            return Range(0.0, 1.0, low_open=True), test.effect_unit
        if test.count_of == "":  # a count, at most top_k
            return Range(0.0, float(cfg.detector.top_k), low_open=True), test.effect_unit
        return OPTION_RANGES["effect"], test.effect_unit
    formula = declaration.power
    highest = {PAIRED_ACCURACY: (1.0, False), ABOVE_CHANCE: (1.0, True), AUC: (0.5, True), SPEARMAN: (1.0, True),
               TWO_PROPORTIONS: (1.0, True)}
    if formula.family not in highest:
        return OPTION_RANGES["effect"], formula.effect_unit
    high, high_open = highest[formula.family]
    return Range(0.0, high, low_open=True, high_open=high_open), formula.effect_unit


def answer(cfg, options: dict[str, float | None]) -> list[str]:
    """The lines printed for a composed config: what n is, the MDE and, with an effect, the n it needs.
    The detector's declaration says which test it runs (a closed formula, a simulation, or none)
    and how its n is counted on the benchmark."""
    from medexp.detectors import declaration_for
    from medexp.detectors.declaration import Simulated, Untested
    from medexp.kernel.registry import import_object
    from medexp.stats import sample_size as pw
    from medexp.stats.detector_power import (
        ABOVE_CHANCE, AUC, ONE_SAMPLE_T, PAIRED_ACCURACY, SPEARMAN, TWO_PROPORTIONS, TWO_SAMPLE_T, NoPowerFormula,
    )

    declaration = declaration_for(cfg.detector)
    kind = declaration.name
    if isinstance(declaration.power, Untested):  # before any benchmark is loaded
        raise NoPowerFormula(f"detector kind {kind!r} is {declaration.power.what}: it tests nothing (no p-value), "
                             "so it has no power and no minimum detectable effect")
    if options["effect"] is not None:
        scale, unit = effect_scale(cfg, declaration)
        _check_option("effect", options["effect"], scale, f" for detector={cfg.detector.name} ({unit})")
    count = import_object(declaration.power_count)(cfg, lambda split=None: load_benchmark(cfg, split))
    if isinstance(declaration.power, Simulated):
        return simulated_answer(cfg, options, kind, count)
    formula = declaration.power
    alpha, power, effect = float(cfg.detector.alpha), float(options["power"]), options["effect"]
    sided, n = formula.sided, count.n
    lines = [f"bench={cfg.bench.name} split={cfg.bench.split} detector={cfg.detector.name} (kind {kind})",
             f"test: {formula.test}", f"alpha={alpha:g} power={power:g} {sided}-sided", *count.lines]
    if formula.family == PAIRED_ACCURACY:
        variance = pw.paired_difference_variance(options["accuracy"], options["correlation"])
        lines.append(f"assumed: var(D) = 2 p (1-p) (1-r) = {variance:.4g} (accuracy p={options['accuracy']:g}, "
                     f"per-item correlation r={options['correlation']:g})")
        mde = pw.paired_accuracy_mde(n, alpha, power, variance, sided)
        needed = None if effect is None else pw.paired_accuracy_n(effect, alpha, power, variance, sided)
    elif formula.family == ABOVE_CHANCE:
        chance = options["chance"] if options["chance"] is not None else count.chance
        if chance is None:
            raise ValueError(f"no item has options: {kind} needs multiple-choice items")
        lines.append(f"assumed: chance rate {chance:.4g}"
                     + ("" if options["chance"] is not None else " (mean 1/k over the items' options)"))
        mde = pw.above_chance_mde(n, chance, alpha, power, sided)
        needed = None if effect is None else pw.above_chance_n(effect, chance, alpha, power, sided)
    elif formula.family == AUC:
        mde = pw.auc_mde(count.first, n - count.first, alpha, power, sided)
        needed = None if effect is None else pw.auc_n(effect, alpha, power, sided, positive_share=count.first / n)
    elif formula.family == SPEARMAN:
        mde = pw.spearman_mde(n, alpha, power, sided)
        needed = None if effect is None else pw.spearman_n(effect, alpha, power, sided)
    elif formula.family == ONE_SAMPLE_T:
        mde = pw.one_sample_t_mde(n, alpha, power, sided)
        needed = None if effect is None else pw.one_sample_t_n(effect, alpha, power, sided)
        units = int(count.sizes.get("examples", n))
        if needed is not None and needed > units:
            lines.append(f"{needed} shards need at least {needed} examples (one per shard)")
    elif formula.family == TWO_SAMPLE_T:
        mde = pw.two_sample_t_mde(count.first, n - count.first, alpha, power, sided)
        needed = None if effect is None else pw.two_sample_t_n(effect, alpha, power, sided, first_share=count.first / n)
    elif formula.family == TWO_PROPORTIONS:
        base_rate = options["chance"] if options["chance"] is not None else count.chance
        lines.append(f"assumed: control rate {base_rate:.4g}"
                     + ("" if options["chance"] is not None else " (the count's default, see its lines)"))
        mde = pw.two_proportions_mde(count.first, n - count.first, base_rate, alpha, power, sided)
        needed = None if effect is None else pw.two_proportions_n(effect, base_rate, alpha, power, sided,
                                                                  first_share=count.first / n)
    else:
        raise NotImplementedError(f"no power computation for formula family {formula.family!r}")
    lines += [f"n: {n} {formula.n_unit}", f"MDE: {mde:.4g} {formula.effect_unit}"]
    if needed is not None:
        verdict = "enough" if needed <= n else f"not enough (short by {needed - n})"
        lines.append(f"effect {effect:g} needs n = {needed} {formula.n_unit}; this benchmark has {n}: {verdict}")
    return lines


def simulated_answer(cfg, options: dict[str, float | None], kind: str, count) -> list[str]:
    """The lines printed for a detector whose MDE is simulated (``medexp.detectors.power_simulation``),
    cached under ``paths.cache_dir``/power: n, the MDE and, with an effect, the n it needs."""
    import math

    from medexp.detectors.power_simulation import LARGEST_SCALE, assumptions_of, simulated_kind, simulated_test
    from medexp.evaluators.simulated_power_cache import cached_simulated_mde, cached_simulated_n

    sizes = dict(count.sizes)
    kind = simulated_kind(kind, cfg.detector)  # the detector's own test (topk_jaccard: its null)
    test = simulated_test(kind)
    alpha, power, effect = float(cfg.detector.alpha), float(options["power"]), options["effect"]
    assumptions = assumptions_of(kind, {name: options[name] for name in SIMULATION_ASSUMPTIONS if options[name] is not None})
    lines = [f"bench={cfg.bench.name} split={cfg.bench.split} detector={cfg.detector.name} (kind {kind})",
             f"test: {test.test}", f"alpha={alpha:g} power={power:g} one-sided", f"model: {test.model}"]
    if assumptions:
        lines.append("assumed: " + ", ".join(f"{name}={value:g}" for name, value in assumptions.items()))
    lines.append(f"n: {count.lines[0]}")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    from medexp.config.command_line import answer_command_line

    return answer_command_line("medexp.power", USAGE, argv, split_arguments,
                               {"bench": "the benchmark", "detector": "the detector"}, answer)


if __name__ == "__main__":
    sys.exit(main())
