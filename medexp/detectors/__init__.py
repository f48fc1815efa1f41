"""Detectors: pure statistics over score tables, one module per detector."""

from medexp.detectors.base import DetectorResult
from medexp.detectors.exch import exch_detector
from medexp.detectors.codec import codec_detector
from medexp.detectors.cohort import CohortScores
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

__all__ = [
    "CohortScores",
    "DetectorResult",
    "PairedLosses",
    "codec_detector",
    "composition_sweep_detector",
    "dataset_inference_detector",
    "exch_detector",
    "exch_rank_detector",
    "image_nn_detector",
    "loss_detector",
    "membership_detector",
    "memorization_detector",
    "mink_tail_detector",
    "topk_jaccard_detector",
]
