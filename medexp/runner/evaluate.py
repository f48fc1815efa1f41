"""From a composed cell config to a detector result: load, control, evaluate, count skips.

The detector's declaration (``medexp.detectors.declaration_for(cfg.detector)``, at the end of the
detector's module) names its evaluator; the evaluator fetches the score tables its detector needs
and calls the detector, a pure function over those tables.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from medexp.benchmarks.skips import skip_metrics
from medexp.detectors.base import DetectorResult
from medexp.evaluators import evaluator_for
from medexp.evaluators.context import CellContext
from medexp.runner.inputs import CellInputs, load_inputs

def check_cell(cfg: DictConfig) -> None:
    """What can be checked before anything is loaded: an evaluator exists, the control fits."""
    from medexp.controls import check_control_fits
    from medexp.evaluators import check_records

    evaluator_for(cfg.detector)  # NotImplementedError for a detector schema without a declaration
    check_control_fits(cfg.control, cfg.detector)
    check_records(cfg)  # a record of scores cannot serve a detector that needs the model itself


def evaluate(cfg: DictConfig, seed: int, inputs: CellInputs | None = None) -> tuple[dict[str, float], DetectorResult]:
    """Run the cell ``cfg`` describes on its ``inputs`` (loaded here when not given): control,
    scores, detector; return its metrics (the detector's, plus ``control_order_spearman``,
    ``n_skipped_examples``, ``n_skipped.<reason>``, when bench.dedup removed rows,
    ``n_deduplicated``, and when the cell's model scored anything, ``tokens_naive``,
    ``tokens_computed`` and ``images_processed``) and result."""
    from medexp.config.schemas import ControlKind
    from medexp.controls import apply_control, order_spearman
    from medexp.evaluators.baselines import run_with_baselines

    check_cell(cfg)  # before anything is loaded or scored
    cache_dir = Path(cfg.paths.cache_dir)
    inputs = inputs or load_inputs(cfg, cache_dir)
    benchmark = inputs.benchmark
    ctx = CellContext(cfg, seed, benchmark, list(benchmark.examples), cache_dir, corpus=inputs.corpus,
                      twin=inputs.twin, flags=inputs.flags)
    # The control may read the cell model's scores of the released examples to choose its order.
    ctx.examples = apply_control(cfg.control, ctx.examples, ctx.example_scores)
    run = evaluator_for(cfg.detector)
    if ControlKind(cfg.control.kind) is ControlKind.external_baseline:
        result = run_with_baselines(ctx, run)
    else:
        result = run(ctx)
    metrics = {
        **result.metrics,
        "control_order_spearman": order_spearman(ctx.examples),
        "n_skipped_examples": float(len(benchmark.skipped)),
        **ctx.scoring_metrics(),
    }
    # Rows skipped while loading, by reason; an answering detector's examples skipped while making
    # probes for the same reason add to the same count.
    for name, count in skip_metrics(benchmark.skipped).items():
        metrics[name] = metrics.get(name, 0.0) + count
    if benchmark.removed_duplicates:
        metrics["n_deduplicated"] = float(len(benchmark.removed_duplicates))
    if benchmark.annotations_only:  # a cell of records read no pixels: the run says so
        metrics["bench_annotations_only"] = 1.0
    return metrics, result

