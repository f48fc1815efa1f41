"""Tables a report reads from the artefacts of tracked runs, and the values derived from them.

Only runs that produce a table are asked for it: a run is recognised by a config parameter that
only its detector has, as the detector's declaration says (``report_tables``: image_nn's
``detector.sweep_alphas``, topk_jaccard's ``detector.top_k``).
From an image_nn run's alpha sweep the report derives three values a claim may read:

* ``alpha_sweep_max_p_value``: the largest flag-count p-value over the swept alphas, so
  ``alpha_sweep_max_p_value < 0.01`` says the image is flagged at every threshold of the sweep;
* ``alpha_sweep_min_flag_rate``: the smallest flag rate over the sweep;
* ``alpha_sweep_span``: largest over smallest swept alpha (100 = two orders of magnitude).
"""

from __future__ import annotations

import logging
from typing import Iterable, Mapping

from medexp.report.cells import CellRun

log = logging.getLogger("medexp")



def artefact_tables() -> dict[str, tuple[str, str]]:
    """Table name -> (the parameter marking runs that log it, its artefact path), as the detectors declare them."""
    from medexp.detectors import declarations

    return {name: spec for declaration in declarations() for name, spec in declaration.report_tables.items()}

ALPHA_SWEEP_VALUES = ("alpha_sweep_max_p_value", "alpha_sweep_min_flag_rate", "alpha_sweep_span")


def read_artefact_tables(tracker, cells: Iterable[CellRun]) -> dict[str, dict[str, object]]:
    """Table name -> run id -> DataFrame, for the cells whose runs log that table."""
    from tqdm import tqdm

    declared = artefact_tables()
    wanted = [(name, path, cell) for cell in cells for name, (marker, path) in declared.items()
              if marker in cell.params]
    tables: dict[str, dict[str, object]] = {name: {} for name in declared}
    for name, path, cell in tqdm(wanted, desc="report: artefact tables", unit="table", disable=len(wanted) < 10):
        try:
            tables[name][cell.run_id] = tracker.read_table(cell.run_id, path)
        except ValueError as error:
            log.warning("cell %s: %s; left out of the figures and derived values", cell.key, error)
    return tables


def derived_values(tables: Mapping[str, Mapping[str, object]]) -> dict[str, dict[str, float]]:
    """Run id -> values derived from its artefact tables (the alpha-sweep summaries)."""
    derived = {}
    for run_id, sweep in tables.get("alpha_sweep", {}).items():
        if sweep.empty:
            continue
        alphas = sweep["alpha"].astype(float)
        derived[run_id] = dict(zip(ALPHA_SWEEP_VALUES, (
            float(sweep["p_value"].max()), float(sweep["flag_rate"].min()), float(alphas.max() / alphas.min()),
        )))
    return derived
