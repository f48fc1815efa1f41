"""``python -m medexp.refine RUN_ID [--permutations N] [--tracking-uri URI]``.

Reruns the permutation test of a tracked exch_rank cell from the scalars it saved (the
per-example table and the cell seed), without the model, with more permutations, and logs the
result to the same run:

* ``p_value_refined``, ``n_permutations_refined``, ``n_exceed_refined``: the new draws alone,
  from a seed derived from the cell seed and "refine" (reproducible, and a stream independent
  of the cell's own draws);
* ``p_value_pooled``, ``n_permutations_pooled``: the cell's draws and the new draws together,
  p = (1 + exceed_cell + exceed_refined) / (1 + P_cell + P_refined), valid because both are
  independent uniform permutations under the null.

The cell's own ``p_value`` is left as it was. Runs of other detectors, and runs that did not
finish, are refused.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

TABLE = "per_example.parquet"
DEFAULT_PERMUTATIONS = 100_000


@dataclass(frozen=True)
class RefinedTest:
    run_id: str
    p_value: float  # the cell's own p-value
    n_permutations: int
    p_value_refined: float
    n_permutations_refined: int
    n_exceed_refined: int
    p_value_pooled: float
    n_permutations_pooled: int

    def metrics(self) -> dict[str, float]:
        return {
            "p_value_refined": self.p_value_refined,
            "n_permutations_refined": float(self.n_permutations_refined),
            "n_exceed_refined": float(self.n_exceed_refined),
            "p_value_pooled": self.p_value_pooled,
            "n_permutations_pooled": float(self.n_permutations_pooled),
        }

    def summary(self) -> str:
        return (f"run {self.run_id}: p_value={self.p_value:.4g} ({self.n_permutations} permutations), "
                f"refined p={self.p_value_refined:.4g} ({self.n_permutations_refined}), "
                f"pooled p={self.p_value_pooled:.4g} ({self.n_permutations_pooled})")


def refine_run(run_id: str, n_permutations: int = DEFAULT_PERMUTATIONS, tracking_uri: str | None = None) -> RefinedTest:
    """Refine the exch_rank p-value of a tracked run and log the refined metrics to it."""
    import numpy as np
    from omegaconf import OmegaConf

    from medexp.config import project_root
    from medexp.config.schemas import TrackingConfig
    from medexp.kernel.hashing import derive_seed
    from medexp.stats import rank_exchangeability
    from medexp.tracking import Tracker

    if n_permutations < 1:
        raise ValueError(f"--permutations must be >= 1, got {n_permutations}")
    tracker = Tracker(OmegaConf.structured(TrackingConfig(uri=tracking_uri)), project_root())
    run = tracker.get_run(run_id)
    if run.status != "FINISHED":
        raise ValueError(f"run {run_id} is {run.status}, not FINISHED; refine only finished cells")
    score = run.params.get("detector.score")
    if score is None or "n_exceed" not in run.metrics:
        detector = run.tags.get("medexp.detector", "unknown")
        raise ValueError(f"run {run_id} is a {detector!r} run; refine reruns only exch_rank permutation tests")
    table = tracker.read_table(run_id, TABLE).sort_values("order_index")
    if score not in table.columns:
        raise ValueError(f"{TABLE} of run {run_id} has no column {score!r} (detector.score)")
    cell_seed = int(run.tags["medexp.seed"])
    loglik = table[score].to_numpy(dtype=np.float64)
    refined = rank_exchangeability(loglik, n_permutations=n_permutations, seed=derive_seed(cell_seed, "refine"))
    if not np.isclose(refined.statistic, run.metrics["statistic"], rtol=0, atol=1e-9):
        raise ValueError(f"{TABLE} of run {run_id} gives statistic {refined.statistic} but the run logged "
                         f"{run.metrics['statistic']}; the table does not belong to this test")
    cell_permutations = int(run.metrics["n_permutations"])
    pooled_permutations = cell_permutations + refined.n_permutations
    result = RefinedTest(
        run_id=run_id,
        p_value=run.metrics["p_value"],
        n_permutations=cell_permutations,
        p_value_refined=refined.p_value,
        n_permutations_refined=refined.n_permutations,
        n_exceed_refined=refined.n_exceed,
        p_value_pooled=(1 + int(run.metrics["n_exceed"]) + refined.n_exceed) / (1 + pooled_permutations),
        n_permutations_pooled=pooled_permutations,
    )
    tracker.log_metrics(run_id, result.metrics())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m medexp.refine",
        description="Refine a tracked exch_rank cell's permutation p-value with more permutations, "
        "from its saved per-example scores (no model needed); logs the result to the same run.",
    )
    parser.add_argument("run_id", help="MLflow run id of a FINISHED exch_rank cell")
    parser.add_argument("--permutations", type=int, default=DEFAULT_PERMUTATIONS,
                        help=f"number of new permutations (default {DEFAULT_PERMUTATIONS:,}; p floor 1/(N+1))")
    parser.add_argument("--tracking-uri", default=None,
                        help="tracking store (default: $MLFLOW_TRACKING_URI, else sqlite:///<root>/mlruns/mlflow.db)")
    args = parser.parse_args(argv)
    try:
        result = refine_run(args.run_id, args.permutations, args.tracking_uri)
    except ValueError as error:
        print(f"refine: {error}", file=sys.stderr)
        return 2
    print(result.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
