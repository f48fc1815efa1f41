"""Regions of interest carried by an example: the ``roi_boxes`` meta field.

A benchmark that knows where the answer lies in the image (MedVIGIL's ``grounding.csv``, SLAKE's
``detection.json``, the demo's lesions) puts in ``Example.meta["roi_boxes"]`` a list of
``{"label": str, "box_norm": [x0, y0, x1, y1], "box_px": [x0, y0, x1, y1] or None}``:
``box_norm`` in image fractions (0 <= x0 < x1 <= 1, y downwards), ``box_px`` the same box in
pixels when the source gives pixels. The probe images read ``box_norm`` and turn it into pixels
of the image they transform (:func:`box_pixels`), so a resized copy still masks the right place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

ROI_FIELD = "roi_boxes"
_EPS = 1e-9


@dataclass(frozen=True)
class RoiBox:
    label: str
    box_norm: tuple[float, float, float, float]
    box_px: Optional[tuple[float, float, float, float]] = None

    def __post_init__(self) -> None:
        if len(self.box_norm) != 4:
            raise ValueError(f"ROI {self.label!r}: box_norm needs 4 numbers [x0, y0, x1, y1], "
                             f"got {list(self.box_norm)}")
        x0, y0, x1, y1 = self.box_norm
        if not (0.0 <= x0 < x1 <= 1.0 and 0.0 <= y0 < y1 <= 1.0):
            raise ValueError(f"ROI {self.label!r}: box_norm {list(self.box_norm)} must satisfy "
                             "0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1")
        if self.box_px is not None and len(self.box_px) != 4:
            raise ValueError(f"ROI {self.label!r}: box_px needs 4 numbers or None, got {list(self.box_px)}")

    def as_meta(self) -> dict[str, Any]:
        return {"label": self.label, "box_norm": list(self.box_norm),
                "box_px": list(self.box_px) if self.box_px is not None else None}


def roi_boxes(meta: dict[str, Any], where: str = "example") -> list[RoiBox]:
    """The boxes of ``meta["roi_boxes"]`` (empty when the field is absent or empty)."""
    entries = meta.get(ROI_FIELD) or []
    boxes = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or "box_norm" not in entry:
            raise ValueError(f"{where}: {ROI_FIELD}[{index}] must be a dict with label, box_norm, box_px; "
                             f"got {entry!r}")
        px = entry.get("box_px")
        boxes.append(RoiBox(str(entry.get("label", "")), tuple(float(v) for v in entry["box_norm"]),
                            tuple(float(v) for v in px) if px is not None else None))
    return boxes


def select_boxes(boxes: Iterable[RoiBox], labels: Optional[Sequence[str]] = None) -> list[RoiBox]:
    """The boxes whose label is in ``labels`` (all boxes when ``labels`` is None)."""
    return [box for box in boxes if labels is None or box.label in labels]


def box_pixels(box_norm: Sequence[float], width: int, height: int) -> tuple[int, int, int, int]:
    """The pixel rectangle ``[x0, x1) x [y0, y1)`` covering every pixel the normalised box touches.

    Edges round outwards (floor of the start, ceil of the end) so that masking the region never
    leaves a sliver of it visible; the rectangle holds at least one pixel.
    """
    x0, y0, x1, y1 = box_norm
    # the tolerance keeps float noise (0.3 * 10 = 3.0000000000000004) from adding a pixel
    left, top = math.floor(x0 * width + _EPS), math.floor(y0 * height + _EPS)
    right, bottom = math.ceil(x1 * width - _EPS), math.ceil(y1 * height - _EPS)
    return left, top, max(right, left + 1), max(bottom, top + 1)
