"""External pre-domain baselines (controlled audit, sections 4.7 and 4.10).

A baseline is a model that cannot have seen the benchmark's domain. The cell's detector runs as
usual for the cell's model and once more for each baseline (:mod:`medexp.evaluators.baselines`,
which owns the cell's context); this module lists the baselines and merges their results. A
signal that a baseline reproduces belongs to the benchmark or to the detector, not to the audited
model's training data.
"""

from __future__ import annotations

import logging

from medexp.detectors.base import DetectorResult

log = logging.getLogger("medexp")


def baseline_models(control_cfg, cell_model_cfg) -> list:
    """Composed model configs of ``control.baselines``, each once, never the cell's own model."""
    from medexp.config import listed_model_config

    names = list(control_cfg.baselines)
    if not names:
        raise ValueError(f"control={control_cfg.name}: control.baselines is empty; list model config names (conf/model)")
    seen = {str(cell_model_cfg.name)}
    configs = []
    for name in names:
        model_cfg = listed_model_config(str(name))  # a name, or a name with overrides
        if str(model_cfg.name) in seen:
            continue
        seen.add(str(model_cfg.name))
        configs.append(model_cfg)
    if not configs:
        log.info("control=%s: every baseline is the cell's model %s; no baseline to run", control_cfg.name,
                 cell_model_cfg.name)
    return configs


def merge_baseline_results(own: DetectorResult, baselines: dict[str, DetectorResult]) -> DetectorResult:
    """The cell's result with each baseline's scalars as ``baseline_<name>_<metric>``.

    Adds ``n_baselines``, ``baselines_min_p_value`` and ``baselines_n_flagged`` (when there is a
    baseline), a ``baselines`` table (one row per baseline: model, then its metrics) and the
    baselines' own tables and figures under ``baselines/<name>/``, and every warning (a
    baseline's prefixed with its name).
    """
    import pandas as pd

    metrics = dict(own.metrics)
    figures = dict(own.figures)
    tables = dict(own.extra_tables)
    rows = []
    warnings = list(own.warnings)
    for name, result in baselines.items():
        warnings += [f"baseline {name}: {warning}" for warning in result.warnings]
        metrics.update({f"baseline_{name}_{key}": value for key, value in result.metrics.items()})
        # p_value, statistic and flag lead the row; the detector's other metrics follow in its order.
        headline = {key: result.metrics[key] for key in ("p_value", "statistic", "flag")}
        rows.append({"model": name, **headline, **result.metrics})
        figures.update({f"baselines/{name}/{stem}": figure for stem, figure in result.figures.items()})
        if result.table is not None:
            tables[f"baselines/{name}/{result.table_name}"] = result.table
        tables.update({f"baselines/{name}/{stem}": table for stem, table in result.extra_tables.items()})
    metrics["n_baselines"] = float(len(baselines))
    if baselines:
        metrics["baselines_min_p_value"] = min(result.metrics["p_value"] for result in baselines.values())
        metrics["baselines_n_flagged"] = float(sum(result.metrics["flag"] for result in baselines.values()))
        tables["baselines"] = pd.DataFrame(rows)
    return DetectorResult(metrics, own.table, own.table_name, figures, tables, warnings=warnings)
