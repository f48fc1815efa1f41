"""Detectors: pure statistics over score tables, one module per detector."""

from medexp.detectors.base import DetectorResult
from medexp.detectors.exch import exch_detector
from medexp.detectors.exch_rank import exch_rank_detector

__all__ = ["DetectorResult", "exch_detector", "exch_rank_detector"]
