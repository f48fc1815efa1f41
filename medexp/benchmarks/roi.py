"""Regions of interest (ROI) in example meta: one shape, whatever benchmark they come from.

Evidence-perturbation probes (MedVIGIL's roi_masked and roi_only) need to know where the
answer-relevant region of an image is. Every loader that knows puts it into ``Example.meta``
under two keys, so probe code reads ROIs the same way for SLAKE, the demo benchmark or a
release that ships normalised boxes (MedVIGIL's ``grounding.csv``, ``roi_bbox_norm``):

``meta["roi_boxes"]``
    ``None`` when the source has no ROI annotation for the image; otherwise a list (possibly
    empty) of ``{"label": str, "box_px": [x0, y0, x1, y1] | None, "box_norm": [x0, y0, x1, y1]}``.
    Corners are in the image file's own pixel grid, origin top-left, x to the right, y down,
    ``x0 <= x1`` and ``y0 <= y1``. ``box_px`` is the box as annotated (it may reach past the
    border); ``box_norm`` is ``box_px`` divided by the image width (x) and height (y) and
    clipped to [0, 1], so it applies to any resized copy of the image. Sources that give only
    normalised corners set ``box_px`` to None; ``box_norm`` is always present. Probe images read
    ``box_norm`` and turn it into pixels of the image they transform (:func:`box_pixels`).
``meta["roi_mask"]``
    Path (a string) of a segmentation mask the size of the image, or ``None``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

ROI_BOXES = "roi_boxes"
ROI_MASK = "roi_mask"
ROI_FIELDS = (ROI_BOXES, ROI_MASK)


def corners_from_xywh(x: float, y: float, width: float, height: float) -> list[float]:
    """``[x0, y0, x1, y1]`` of a box given by its top-left corner and its size."""
    return [x, y, x + width, y + height]


def normalise_box(box_px: Sequence[float], image_width: int, image_height: int) -> list[float]:
    """Pixel corners divided by the image size, each clipped to [0, 1]."""
    x0, y0, x1, y1 = box_px
    scale = (image_width, image_height, image_width, image_height)
    return [min(1.0, max(0.0, value / size)) for value, size in zip((x0, y0, x1, y1), scale)]


def roi_entry(label: str, box_px: Sequence[float], image_size: tuple[int, int]) -> dict:
    """One ``roi_boxes`` item for a box annotated in pixels of an image of ``(width, height)``."""
    return {"label": label, "box_px": list(box_px), "box_norm": normalise_box(box_px, *image_size)}


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
    entries = meta.get(ROI_BOXES) or []
    boxes = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or "box_norm" not in entry:
            raise ValueError(f"{where}: {ROI_BOXES}[{index}] must be a dict with label, box_norm, box_px; "
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
