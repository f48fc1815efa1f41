"""``python -m medexp.plan <a cell's overrides> [split.tasks=<n>]``

What a cell is about to compute, before any of it is computed: the cell is run as far as its
first cache entry with shards still to compute (score tables, image embeddings, responses), and
stops there. Printed: that entry (what it is, items, shards, shards already written by an
interrupted run or by other jobs), with ``split.tasks=n`` where each of the n jobs starts and how
many shards each computes when all run at once, and the memory a job holds for the model.

Getting there reads the benchmark and fingerprints the model, as the cell would: a demo model
missing from the cache is built first. A cell reading several entries (a cohort's models) plans
the first one; once it is cached, the plan names the next.

``python -m medexp.plan experiment=<grid preset> [--tflops=<achieved TFLOP/s>]`` sizes a whole
grid instead (``experiment=controlled_audit``: the published one): its cells, the teacher-forced
scoring they need (each model on each benchmark once: the score cache serves every cell that
reads it), examples, tokens per example, FLOPs, memory and GPU hours (:mod:`medexp.models.cost`).
Hours are at the rate each checkpoint was measured to reach on a GPU (:mod:`medexp.models.throughput`),
:data:`DEFAULT_TFLOPS` for a checkpoint not measured; ``--tflops`` sets one rate for every model.
By default each model is sized from its published facts shipped in :mod:`medexp.models.published`
(config.json architecture, processor rules; text tokens a stated round estimate): no model file is
downloaded and the hub is never contacted for a model. ``--from-checkpoint`` reads each
checkpoint's config and processor instead (exact token counts; needs the checkpoint local or the
hub). Weights are never read.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from math import ceil
from pathlib import Path
from typing import Sequence

USAGE = """usage: python -m medexp.plan model=<name> [bench=<name>] [detector=<name>] [split.tasks=<n>] [other overrides]
       python -m medexp.plan experiment=<grid preset> [--tflops=<achieved TFLOP/s>] [--from-checkpoint] [other overrides]

What the cell would compute first (its first cache entry not complete yet), and how split.tasks=<n>
jobs would share it (docs/clusters.md, "Work bigger than one job"); nothing is computed.
With experiment=<grid preset>, size the preset's whole grid: cells, scoring jobs, examples,
tokens, FLOPs, memory and GPU hours: at the rate each checkpoint reached on an NVIDIA H200
(medexp/models/measured), 300 TFLOP/s for one not measured, or --tflops for all; weights are
never read. Models are sized from the published facts shipped with medexp (no download, no hub);
--from-checkpoint reads each checkpoint's config and processor.
Example: python -m medexp.plan model=demo_leaky detector=exch split.tasks=4
         python -m medexp.plan experiment=controlled_audit"""
DEFAULT_TFLOPS = 300.0


def plan_lines(cfg) -> list[str]:
    """The lines printed for a composed config."""
    from medexp.kernel.cell import Cell
    from medexp.runner.evaluate import evaluate
    from medexp.kernel.shards import Planned, planning

    cell = Cell.from_config(cfg)
    lines = [f"cell {cell.key}"]
    try:
        with planning():
            evaluate(cfg, cell.seed(cfg.seed))  # checks the cell, loads its inputs, stops at the first work
    except Planned as planned:
        plan = planned.plan
    else:
        return lines + ["nothing to compute: every cache entry the cell reads is complete (running it only reads them)"]
    missing = plan.shards - plan.written
    lines.append(f"first work: {plan.desc}, {plan.items} items in {plan.shards} shards of {plan.shard_size} "
                 f"({plan.written} written already, {missing} to compute)")
    lines.append(f"  cache entry {plan.path}")
    tasks = int(cfg.split.tasks)
    if tasks > 1:
        starts = ", ".join(str(task * plan.shards // tasks) for task in range(tasks))
        lines.append(f"split.tasks={tasks}: tasks start at shards {starts}; running at once, each computes about "
                     f"{ceil(missing / tasks)} shards (a task alone computes what no other task has)")
        lines.append(f"  run them: python -m medexp -m <the cell's overrides> split.tasks={tasks} "
                     f"split.task={','.join(map(str, range(tasks)))} hydra/launcher=<submitit_slurm|ray>")
        lines.append("  then the cell without split.* reads the entry and tracks its run")
    lines.append(f"memory per job: {_weights_line(cfg)}")
    return lines


def _weights_line(cfg) -> str:
    """The model's weights on disk: what each job loads once (in ``model.dtype``), plus a batch."""
    from medexp.models import BLACK_BOX_FAMILIES, model_location

    family = getattr(cfg.model.family, "value", cfg.model.family)
    if family in BLACK_BOX_FAMILIES:
        return "no weights (a black box answers through its API or files)"
    try:
        location = Path(model_location(cfg.model, cfg.paths.cache_dir))
    except ValueError as error:
        return f"unknown ({error})"
    files = list(location.glob("*.safetensors")) if location.is_dir() else []
    if not files:
        return f"the size of {location} (not on this machine yet: its weights, once, plus a batch of inputs)"
    size = sum(path.stat().st_size for path in files)
    shown = f"{size / 2**30:.2f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"
    dtype = getattr(cfg.model.dtype, "value", cfg.model.dtype)
    return (f"{shown} of weights on disk ({len(files)} safetensors files, loaded once in model.dtype={dtype}) "
            f"plus a batch of {cfg.model.batch_size} inputs")


def grid_blocks(overrides: list[str]) -> list | None:
    """The ``hydra.sweeper.grid`` blocks of the experiment preset the overrides name, if any."""
    from omegaconf import OmegaConf

    from medexp.config import conf_dir

    names = [arg.partition("=")[2] for arg in overrides if arg.startswith("experiment=")]
    if not names:
        return None
    grid = OmegaConf.select(OmegaConf.load(conf_dir() / "experiment" / f"{names[-1]}.yaml"), "hydra.sweeper.grid")
    return None if grid is None else OmegaConf.to_container(grid)


def grid_lines(blocks: list, overrides: list[str], tflops: float | None, locate=None,
               from_checkpoint: bool = False) -> list[str]:
    """The size of a grid (its blocks combined with the command line's overrides, as the grid
    sweeper combines them): cells by detector, then one row per teacher-forced scoring job with
    its examples, tokens, FLOPs, memory and GPU hours. Each model is sized from its published
    facts (:mod:`medexp.models.published`, nothing fetched), or with ``from_checkpoint`` from its
    checkpoint's config and processor, which ``locate(model_cfg, cache_dir)`` finds (default:
    :func:`medexp.models.model_location`). ``tflops``: one rate for every model; None: each
    checkpoint's measured rate (:func:`rates`)."""
    from collections import Counter

    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from hydra_plugins.medexp_grid_sweeper.medexp_grid_sweeper import expand_grid
    from medexp.benchmarks import expected_count
    from medexp.config import compose, listed_model_config
    from medexp.detectors import declaration_for
    from medexp.evaluators import cell_model_configs
    from medexp.models import model_location
    from medexp.models.cost import memory_bytes
    from medexp.models.published import TEXT_TOKENS_ESTIMATE

    parser = OverridesParser.create()
    # The preset is composed into every cell; the other overrides combine with its blocks.
    preset = [arg for arg in overrides if arg.startswith("experiment=")]
    command_line = [arg for arg in overrides if not arg.startswith("experiment=")]
    jobs = expand_grid(blocks, parser.parse_overrides(command_line), parser)
    kinds: Counter = Counter()
    scoring: dict[tuple[str, str], tuple] = {}  # (model, bench) -> (model config, bench config, paths)
    unsized: Counter = Counter()
    # Each list entry (a cohort member, an external baseline) composed once, not once per cell that
    # lists it: composing is most of the command's time, and the configs are only read here.
    listed = lru_cache(maxsize=None)(listed_model_config)
    for job in jobs:
        cfg = compose([*preset, *job])
        kind = declaration_for(cfg.detector).name
        kinds[kind] += 1
        if getattr(OmegaConf.get_type(cfg.detector), "model_needs", "model") not in ("scores", "token_scores"):
            unsized[kind] += 1
            continue
        for name, model_cfg in cell_model_configs(cfg, listed).items():
            scoring.setdefault((name, str(cfg.bench.name)), (model_cfg, cfg.bench, cfg.paths))
    lines = [f"grid: {len(jobs)} cells ({', '.join(f'{kind} {n}' for kind, n in sorted(kinds.items()))})",
             f"teacher-forced scoring: {len(scoring)} jobs (a model on a benchmark, scored once: the score cache "
             "serves every cell that reads it), one 512 x 512 image with a SLAKE question as each model's "
             f"representative example; 'shared': with shared prefixes, one per image (known when the benchmark is "
             f"on this machine); {_rate_sentence(tflops)}",
             "| model | bench | examples | images | tokens/example | image tokens | TFLOP/example | PFLOP "
             "| PFLOP shared | weights+KV GiB | GPU h | GPU h shared | TFLOP/s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    if from_checkpoint:
        costs = {name: _model_cost(model_cfg, paths, locate or model_location)
                 for (name, _), (model_cfg, _, paths) in sorted(scoring.items())}
    else:
        costs = {name: _published_cost(model_cfg) for (name, _), (model_cfg, _, _) in sorted(scoring.items())}
        lines.insert(2, f"sized offline from published facts (medexp/models/published; --from-checkpoint reads the "
                        f"checkpoints instead): architecture from each config.json, image tokens by the processor's "
                        f"rule, text tokens (template, question, answer) estimated at {TEXT_TOKENS_ESTIMATE} per "
                        "example, not counted by a tokenizer; shared prefix taken as the image tokens alone")
    benches = {bench: (bench_cfg, paths) for (_, bench), (_, bench_cfg, paths) in sorted(scoring.items())}
    images = {bench: _bench_images(bench_cfg, paths) for bench, (bench_cfg, paths) in benches.items()}  # once each
    total, total_hours, total_shared_hours, missing = 0.0, 0.0, 0.0, []
    for (name, bench), (model_cfg, bench_cfg, _) in sorted(scoring.items()):
        examples, cost, n_images = expected_count(bench_cfg), costs[name], images[bench]
        shown_images = n_images if isinstance(n_images, int) else "unknown"
        if isinstance(cost, str) or examples is None:
            missing.append(f"{name} on {bench}")
            lines.append(f"| {name} | {bench} | {examples or 'unknown'} | {shown_images} | unknown (below) "
                         "| | | | | | | | |")
            continue
        arch, example = cost
        flops = examples * example.flops
        shared = example.shared_flops(examples, n_images) if isinstance(n_images, int) else flops
        whole_rate, shared_rate, rate_shown = rates(model_cfg, tflops)
        hours = flops / (whole_rate * 1e12) / 3600
        # Where nothing is shared (a family that scores whole, one question per image, images not
        # known) the shared path runs every example whole, at the whole rate.
        shared_hours = hours if shared == flops else shared / (shared_rate * 1e12) / 3600
        total, total_hours, total_shared_hours = total + flops, total_hours + hours, total_shared_hours + shared_hours
        shared_cells = ((f"{shared / 1e15:.2f}", f"{shared_hours:.2f}") if isinstance(n_images, int)
                        else ("unknown", "unknown"))
        lines.append(f"| {name} | {bench} | {examples} | {shown_images} | {example.tokens} | {example.image_tokens} | "
                     f"{example.flops / 1e12:.2f} | {flops / 1e15:.2f} | {shared_cells[0]} | "
                     f"{memory_bytes(arch, model_cfg, example.tokens) / 2**30:.1f} | {hours:.2f} | "
                     f"{shared_cells[1]} | {rate_shown} |")
    lines.append(f"total: {total / 1e15:.1f} PFLOP, {total_hours:.1f} GPU hours; with shared prefixes "
                 f"{total_shared_hours:.1f} GPU hours (whole where a benchmark's images are unknown)"
                 + (f"; not counted: {', '.join(missing)}" if missing else ""))
    lines += [f"{name}: unknown, {cost}" for name, cost in costs.items() if isinstance(cost, str)]
    lines += [f"{bench} images: unknown, {count}" for bench, count in images.items() if isinstance(count, str)]
    if unsized:
        lines.append("not sized here (no teacher-forced benchmark scores): "
                     + ", ".join(f"{kind} {n} cells" for kind, n in sorted(unsized.items())))
    return lines


def rates(model_cfg, tflops: float | None) -> tuple[float, float, str]:
    """(TFLOP/s scoring whole, TFLOP/s with shared prefixes, how the table shows them): ``tflops``
    where given, else the checkpoint's measured rates, else :data:`DEFAULT_TFLOPS` assumed."""
    from medexp.models.throughput import measured_rate

    if tflops is not None:
        return tflops, tflops, f"{tflops:g} given"
    measured = measured_rate(model_cfg)
    if measured is None:
        return DEFAULT_TFLOPS, DEFAULT_TFLOPS, f"{DEFAULT_TFLOPS:g} assumed"
    if measured.shared is None:
        return measured.whole, measured.whole, f"{measured.whole:.0f} measured (scored whole)"
    return measured.whole, measured.shared, f"{measured.whole:.0f} / {measured.shared:.0f} measured"


def _rate_sentence(tflops: float | None) -> str:
    if tflops is not None:
        return f"GPU hours at {tflops:g} TFLOP/s achieved per GPU (--tflops) for every model"
    from medexp.models.throughput import measured_on

    return (f"GPU hours at the TFLOP/s (whole / shared) each checkpoint reached on an {measured_on()} "
            f"(medexp/models/measured, perf/gpu_families.py: the cost model's FLOPs over measured seconds), "
            f"{DEFAULT_TFLOPS:g} assumed for a checkpoint not measured; --tflops sets one rate for all")


def _bench_images(bench_cfg, paths) -> int | str:
    """How many distinct images the benchmark's examples show (its annotations alone are read), or
    why that is unknown (the benchmark is not on this machine)."""
    from medexp.benchmarks import load_benchmark_from_config

    try:
        benchmark = load_benchmark_from_config(bench_cfg, paths.cache_dir, pixels=False)
    except Exception as error:  # a benchmark not on this machine leaves the shared columns unknown
        return f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    return len({str(example.image) for example in benchmark.examples if example.image is not None})


def _model_cost(model_cfg, paths, locate):
    """(architecture, cost of the default example) of a model, or why it is unknown."""
    import tempfile

    from medexp.models.cost import scoring_cost
    from medexp.models.preview import default_example

    try:
        with tempfile.TemporaryDirectory() as workdir:
            return scoring_cost(model_cfg, str(locate(model_cfg, paths.cache_dir)), default_example(Path(workdir)))
    except Exception as error:  # one unreachable checkpoint leaves its rows unknown, not the table
        return f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"


def _published_cost(model_cfg):
    """(architecture, cost of the default example) from the published facts, or why unknown."""
    from medexp.models.preview import DEFAULT_SIDE
    from medexp.models.published import PublishedFactsMissing, offline_cost

    try:
        return offline_cost(model_cfg, DEFAULT_SIDE, DEFAULT_SIDE)
    except PublishedFactsMissing as missing:
        return f"no offline estimate: {missing}"


def _split_grid_options(args: list[str]) -> tuple[list[str], dict]:
    overrides, options = [], {"tflops": None, "from_checkpoint": False}
    for arg in args:
        name, _, value = arg.partition("=")
        if arg == "--from-checkpoint":
            options["from_checkpoint"] = True
        elif name == "--tflops":
            try:
                options["tflops"] = float(value)
            except ValueError:
                raise ValueError(f"--tflops needs a number of TFLOP/s, got {value!r}") from None
            if not options["tflops"] > 0:
                raise ValueError(f"--tflops must be positive, got {value}")
        else:
            overrides.append(arg)
    return overrides, options


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    from medexp.config.command_line import answer_command_line

    args = list(sys.argv[1:] if argv is None else argv)
    blocks = grid_blocks(args)
    if blocks is not None:
        overrides = [arg for arg in args if not arg.startswith(("--tflops", "--from-checkpoint"))]
        return answer_command_line("medexp.plan", USAGE, args, _split_grid_options, {},
                                   lambda cfg, options: grid_lines(blocks, overrides, options["tflops"],
                                                                   from_checkpoint=options["from_checkpoint"]))
    return answer_command_line("medexp.plan", USAGE, argv, lambda args: (args, {}), {"model": "the model"},
                               lambda cfg, _: plan_lines(cfg))


if __name__ == "__main__":
    sys.exit(main())
