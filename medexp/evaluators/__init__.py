"""From a cell to a detector result: one evaluator per detector, named by its declaration.

An evaluator (:data:`~medexp.evaluators.context.Evaluator`) takes the cell's
:class:`~medexp.evaluators.context.CellContext`, fetches the score tables or answers its detector
needs (through the caches) and calls the detector, a pure function over them. The detector's
declaration (:mod:`medexp.detectors.declaration`, at the end of its module in
:mod:`medexp.detectors`) names its evaluator as "module:function"; each family's evaluators sit in
one module, named like its schema module in :mod:`medexp.config.schemas`.
"""

from __future__ import annotations

from omegaconf import OmegaConf

from medexp.detectors import declaration_for
from medexp.evaluators.context import Evaluator
from medexp.kernel.registry import import_object


def evaluator_for(detector_cfg) -> Evaluator:
    """The evaluator of a composed detector config, as its declaration names it (its module is imported here, once)."""
    return import_object(declaration_for(detector_cfg).evaluator)


def cell_model_configs(cfg, listed_model_config=None) -> dict:
    """The model configs a cell reads, by name as listed: its model, its cohort (none under
    control=synthetic, whose cohort is the calibration model's members), its reference models, its
    baseline (``detector.baseline``) and its control's external baselines. A list entry is
    composed by ``listed_model_config`` (``medexp.config``'s by default; a caller sizing many cells
    passes a cached one)."""
    from medexp.config.schemas import ControlKind

    if listed_model_config is None:
        from medexp.config import listed_model_config

    configs = {str(cfg.model.name): cfg.model}
    cohort = [] if ControlKind(cfg.control.kind) is ControlKind.synthetic else cfg.detector.get("cohort", [])
    baseline = [cfg.detector.baseline] if cfg.detector.get("baseline") else []
    for name in [*cohort, *cfg.detector.get("reference_models", []), *baseline, *cfg.control.get("baselines", [])]:
        # keyed by the list entry as written, so the inputs hash of a list of bare names is unchanged
        configs.setdefault(str(name), listed_model_config(str(name)))
    return configs


def check_records(cfg) -> None:
    """Refuse, before anything is loaded, a cell one of whose models is a record of scores that
    cannot serve its detector or control (``medexp.models.records.record_refusal``)."""
    from medexp.models.records import record_refusal

    for model_cfg in cell_model_configs(cfg).values():
        problem = record_refusal(model_cfg, cfg.detector, cfg.control)
        if problem:
            raise ValueError(problem)


def cell_reads_pixels(cfg) -> bool:
    """Whether a cell reads its benchmark's images: always, unless every model it reads is a record
    of scores, its detector reads nothing but their per-example scores and its flag source, if it
    has one, reads no image (then the release's annotations alone are loaded, and the run says so)."""
    from medexp.evaluators.flag_sources import reads_pixels
    from medexp.models.records import RECORD_READABLE, is_record

    schema = OmegaConf.get_type(cfg.detector)
    if getattr(schema, "model_needs", "model") != RECORD_READABLE:
        return True
    if cfg.detector.get("flags") is not None and reads_pixels(cfg.detector.flags):
        return True
    return not all(is_record(model_cfg) for model_cfg in cell_model_configs(cfg).values())
