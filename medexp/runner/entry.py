"""The entry of ``python -m medexp``: one cell, or one cell of a sweep, and its summary line."""

from __future__ import annotations

import sys

from omegaconf import DictConfig

from medexp.kernel.atomic import DiskFull
from medexp.kernel.cell import Cell
from medexp.runner.cell_run import CellOutcome, run_cell
from medexp.runner.signals import Interrupted, exit_status, signal_name


def run_from_hydra(cfg: DictConfig) -> CellOutcome:
    """Entry used by ``python -m medexp``: run the cell (a sweep's cell under -m), print its summary line.

    A bad config value or an unreachable tracking store exits with status 2 and the message, a
    tracking store without space with status 1; a signal exits with 128 + its number after the run is ended KILLED.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from medexp.config.ranges import ConfigRangeError
    from medexp.tracking import TrackingUnavailable, ui_command

    in_sweep = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        if in_sweep:
            from medexp.runner.sweep import run_sweep_cell

            outcome = run_sweep_cell(cfg)
        else:
            outcome = run_cell(cfg)
    except (ConfigRangeError, TrackingUnavailable) as error:
        print(f"medexp: error: {error}", file=sys.stderr)
        sys.exit(2)
    except DiskFull as error:  # the tracking store's disk, before the run could be opened
        print(f"medexp: error: {error}", file=sys.stderr)
        sys.exit(1)
    except (Interrupted, KeyboardInterrupt) as error:
        print(f"medexp: {Cell.from_config(cfg).key} interrupted by {signal_name(error)}; its run ends KILLED, "
              "rerun the same command to resume", file=sys.stderr)
        sys.exit(exit_status(error))
    print(outcome.summary())
    print(f"view it: {ui_command(cfg.tracking, cfg.paths.root)}")
    if outcome.status == "FAILED" and not in_sweep:
        sys.exit(1)  # a single failed cell is an error; inside a sweep the others go on
    return outcome
