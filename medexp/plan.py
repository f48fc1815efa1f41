"""``python -m medexp.plan <a cell's overrides> [split.tasks=<n>]``

What a cell is about to compute, before any of it is computed: the cell is run as far as its
first cache entry with shards still to compute (score tables, image embeddings, responses), and
stops there. Printed: that entry (what it is, items, shards, shards already written by an
interrupted run or by other jobs), with ``split.tasks=n`` where each of the n jobs starts and how
many shards each computes when all run at once, and the memory a job holds for the model.

Getting there reads the benchmark and fingerprints the model, as the cell would: a demo model
missing from the cache is built first. A cell reading several entries (a cohort's models) plans
the first one; once it is cached, the plan names the next.
"""

from __future__ import annotations

import sys
from math import ceil
from pathlib import Path
from typing import Sequence

USAGE = """usage: python -m medexp.plan model=<name> [bench=<name>] [detector=<name>] [split.tasks=<n>] [other overrides]

What the cell would compute first (its first cache entry not complete yet), and how split.tasks=<n>
jobs would share it (docs/clusters.md, "Work bigger than one job"); nothing is computed.
Example: python -m medexp.plan model=demo_leaky detector=exch split.tasks=4"""


def plan_lines(cfg) -> list[str]:
    """The lines printed for a composed config."""
    from medexp.cell import Cell
    from medexp.runner.evaluate import evaluate
    from medexp.shards import Planned, planning

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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    from medexp.config.command_line import answer_command_line

    return answer_command_line("medexp.plan", USAGE, argv, lambda args: (args, {}), {"model": "the model"},
                               lambda cfg, _: plan_lines(cfg))


if __name__ == "__main__":
    sys.exit(main())
