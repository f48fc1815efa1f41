"""The ``synthetic`` format: text-free examples carrying the easiness e_i of the calibration model.

Nothing is read from disk: the examples are drawn from ``bench.synthetic`` (n, OPEN share,
CLOSED mean, seed). Each has meta ``answer_type`` (OPEN or CLOSED) and ``easiness``; the scores
of its models come from ``control=synthetic`` (medexp.controls.synthetic), never from a scorer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.records import SourceRow, assemble
from medexp.stats.calibration import Easiness, draw_easiness


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """The synthetic benchmark ``bench.synthetic`` describes, in position order."""
    params = synthetic_parameters(bench_cfg)
    easiness = easiness_sampler(params)(np.random.default_rng(params.seed))
    answer_types = ["CLOSED" if closed else "OPEN" for closed in easiness.closed]
    rows = (
        SourceRow(
            source_id=index,
            question=f"synthetic item {index}",
            answer=answer_type,
            meta={"answer_type": answer_type, "easiness": float(value)},
        )
        for index, (value, answer_type) in enumerate(zip(easiness.values, answer_types))
    )
    return assemble(bench_cfg.name, bench_cfg.split, rows, bench_cfg.max_examples)


def easiness_sampler(params) -> Callable[[np.random.Generator], Easiness]:
    """A function drawing one benchmark's easiness from ``params`` (a ``bench.synthetic`` section)
    with the generator it is given: the loader and the composition sweep draw alike."""
    n_examples, open_fraction = int(params.n_examples), float(params.open_fraction)
    closed_mean = float(params.closed_mean)
    return lambda rng: draw_easiness(n_examples, open_fraction, closed_mean, rng)


def synthetic_parameters(bench_cfg):
    """The ``bench.synthetic`` section, or an error when a synthetic benchmark lacks it."""
    if bench_cfg.get("synthetic") is None:
        raise ValueError(f"bench={bench_cfg.name} has no `synthetic:` section (n_examples, open_fraction, "
                         "closed_mean, seed): the calibration model needs bench=synthetic or a copy of it")
    return bench_cfg.synthetic
