"""The image transforms of the evidence probes, and where their results are written.

Each transform is a pure function of a PIL image: the same input gives the same pixels.

* :func:`mask_regions` (roi_masked): the regions filled with mid-grey 128, the rest untouched;
* :func:`keep_regions` (roi_only): a mid-grey 128 canvas of the same size with the regions
  pasted back at the same place;
* :func:`mirror` (lr_flip): a horizontal flip (column ``x`` becomes ``width - 1 - x``);
* :func:`blur` (blur_<sigma>): an isotropic Gaussian blur of standard deviation ``sigma`` pixels.

Mid-grey rather than black, as MedVIGIL does, so that a model cannot read an all-black patch as
"no image". Images in modes L and RGB keep their mode; any other mode is converted to RGB first.

The blur is Pillow's ``ImageFilter.GaussianBlur(radius=sigma)`` (the radius is the standard
deviation). That is what the MedVIGIL harness renders its sweep with, so our blurred images match
the harness's for the same source; it approximates the Gaussian with three box-filter passes, so
its cost does not grow with sigma (about 0.05 s for a 1024 x 1024 RGB image at sigma 64, against
1.6 s for scipy's exact ``gaussian_filter``), and it stays within a few grey levels of the exact
Gaussian with nearest-edge extension (``tests/probes/test_probe_images.py`` bounds the gap).
The paper's text names OpenCV's ``GaussianBlur`` with an unstated kernel size; OpenCV is not a
dependency and the kernel size is not recoverable.

Derived images are stored content-addressed (:func:`store_derived`): lossless PNG, named by the
SHA-256 of the bytes, written atomically, each distinct image once. PNG rather than the source's
JPEG so that the grey fill stays exactly 128. The bytes come from the local zlib: another machine
may produce other bytes (and so another name) for the same pixels, which costs a recomputation,
never a wrong answer.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

from medexp.benchmarks.roi import box_pixels

GREY = 128
_KEPT_MODES = ("L", "RGB")
PixelBox = tuple[int, int, int, int]  # left, top, right, bottom (right and bottom exclusive)


def normalised(image):
    """``image`` in mode L or RGB (other modes are converted to RGB)."""
    return image if image.mode in _KEPT_MODES else image.convert("RGB")


def pixel_boxes(image, boxes_norm: Sequence[Sequence[float]]) -> list[PixelBox]:
    """The pixel rectangles of normalised boxes on this image (see :func:`box_pixels`)."""
    width, height = image.size
    return [box_pixels(box, width, height) for box in boxes_norm]


def mask_regions(image, boxes: Sequence[PixelBox]):
    """A copy of ``image`` with every box filled with grey 128."""
    _require_boxes(boxes)
    out = normalised(image).copy()
    for box in boxes:
        out.paste(_grey(out.mode), box)
    return out


def keep_regions(image, boxes: Sequence[PixelBox]):
    """A grey-128 canvas of the image's size with the boxes' pixels pasted at their place."""
    from PIL import Image

    _require_boxes(boxes)
    source = normalised(image)
    out = Image.new(source.mode, source.size, _grey(source.mode))
    for box in boxes:
        out.paste(source.crop(box), box[:2])
    return out


def mirror(image):
    """The image flipped left to right."""
    from PIL import ImageOps

    return ImageOps.mirror(normalised(image))


def blur(image, sigma: float):
    """Gaussian blur of standard deviation ``sigma`` pixels; sigma 0 returns an unchanged copy."""
    from PIL import ImageFilter

    if sigma < 0:
        raise ValueError(f"blur sigma must be >= 0, got {sigma}")
    source = normalised(image)
    return source.copy() if sigma == 0 else source.filter(ImageFilter.GaussianBlur(radius=sigma))


def png_bytes(image) -> bytes:
    """The image encoded as PNG with fixed settings (no metadata, compression level 6)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=6, optimize=False)
    return buffer.getvalue()


def store_derived(image, store: Path, label: str) -> Path:
    """Write ``image`` into the content-addressed ``store`` (once) and return its path.

    ``label`` names the image's origin in the error raised if the encoded bytes do not decode.
    """
    from medexp.benchmarks.images import store_image_bytes

    path, problem = store_image_bytes(png_bytes(image), Path(store), label)
    if path is None:
        raise ValueError(f"derived image {label} could not be stored: {problem}")
    return path


def _grey(mode: str):
    return GREY if mode == "L" else (GREY, GREY, GREY)


def _require_boxes(boxes: Sequence[PixelBox]) -> None:
    if not boxes:
        raise ValueError("a region transform needs at least one box")
    for box in boxes:
        left, top, right, bottom = box
        if right <= left or bottom <= top:
            raise ValueError(f"empty pixel box {box} (need left < right and top < bottom)")
