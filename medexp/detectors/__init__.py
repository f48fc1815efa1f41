"""Detectors: pure statistics over score tables, one module per detector, each ending with its
declaration (:class:`~medexp.detectors.declaration.DetectorDeclaration`), found through :data:`DETECTORS`."""

from omegaconf import OmegaConf

from medexp.config.schemas import DETECTOR_SCHEMAS

from medexp.detectors.base import DetectorResult
from medexp.detectors.exch import exch_detector
from medexp.detectors.codec import codec_detector
from medexp.detectors.cohort import CohortScores
from medexp.detectors.declaration import DetectorDeclaration
from medexp.detectors.composition_sweep import composition_sweep_detector
from medexp.detectors.dataset_inference import dataset_inference_detector
from medexp.detectors.exch_rank import exch_rank_detector
from medexp.detectors.image_nn import image_nn_detector
from medexp.detectors.loss import loss_detector
from medexp.detectors.differential import PairedLosses
from medexp.detectors.membership import membership_detector
from medexp.detectors.memorization import memorization_detector
from medexp.detectors.mink_tail import mink_tail_detector
from medexp.detectors.topk_jaccard import topk_jaccard_detector
from medexp.kernel.registry import import_object

# Detector name (the key its schema is stored under in DETECTOR_SCHEMAS) -> its declaration, as
# "module:attr": the detector's own module, which also holds its statistics.
DETECTORS = {
    "exch": "medexp.detectors.exch:DECLARATION",
    "exch_rank": "medexp.detectors.exch_rank:DECLARATION",
    "mink_tail": "medexp.detectors.mink_tail:DECLARATION",
    "topk_jaccard": "medexp.detectors.topk_jaccard:DECLARATION",
    "loss": "medexp.detectors.loss:DECLARATION",
    "image_nn": "medexp.detectors.image_nn:DECLARATION",
    "composition_sweep": "medexp.detectors.composition_sweep:DECLARATION",
    "memorization": "medexp.detectors.memorization:DECLARATION",
    "membership": "medexp.detectors.membership:DECLARATION",
    "dataset_inference": "medexp.detectors.dataset_inference:DECLARATION",
    "codec": "medexp.detectors.codec:DECLARATION",
    "option_order": "medexp.detectors.option_order:DECLARATION",
    "slot_guess": "medexp.detectors.slot_guess:DECLARATION",
    "text_only": "medexp.detectors.text_only:DECLARATION",
    "medvigil": "medexp.detectors.medvigil:DECLARATION",
    "perturbation_gap": "medexp.detectors.perturbation_gap:DECLARATION",
    "overlap_gap": "medexp.detectors.overlap_gap:DECLARATION",
    "overlap_gap_answers": "medexp.detectors.overlap_gap_answers:DECLARATION",
    "none_option": "medexp.detectors.none_option:DECLARATION",
    "renumbered_options": "medexp.detectors.renumbered_options:DECLARATION",
    "open_ended": "medexp.detectors.open_ended:DECLARATION",
    "source_naming": "medexp.detectors.source_naming:DECLARATION",
}


def declaration_of(name: str) -> DetectorDeclaration:
    """The declaration of the detector ``name``; a KeyError naming the known detectors otherwise."""
    if name not in DETECTORS:
        raise KeyError(f"no detector named {name!r}; detectors: {sorted(DETECTORS)}")
    return import_object(DETECTORS[name])


def declaration_for(detector_cfg) -> DetectorDeclaration:
    """The declaration of a composed detector config, found by the schema it was composed with."""
    schema = OmegaConf.get_type(detector_cfg)
    names = [name for name, name_schema in DETECTOR_SCHEMAS.items() if name_schema is schema]
    if not names or names[0] not in DETECTORS:
        raise NotImplementedError(f"no declaration for detector schema {schema.__name__}")
    return declaration_of(names[0])


def declarations() -> list[DetectorDeclaration]:
    """Every detector's declaration, in the table's order."""
    return [declaration_of(name) for name in DETECTORS]


__all__ = [
    "CohortScores",
    "DETECTORS",
    "DetectorDeclaration",
    "DetectorResult",
    "PairedLosses",
    "codec_detector",
    "composition_sweep_detector",
    "dataset_inference_detector",
    "declaration_for",
    "declaration_of",
    "declarations",
    "exch_detector",
    "exch_rank_detector",
    "image_nn_detector",
    "loss_detector",
    "membership_detector",
    "memorization_detector",
    "mink_tail_detector",
    "topk_jaccard_detector",
]
