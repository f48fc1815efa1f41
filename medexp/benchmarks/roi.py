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
    normalised corners set ``box_px`` to None; ``box_norm`` is always present.
``meta["roi_mask"]``
    Path (a string) of a segmentation mask the size of the image, or ``None``.
"""

from __future__ import annotations

from typing import Sequence

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
