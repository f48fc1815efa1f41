"""Probe image transforms against hand-made expectations."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

from medexp.benchmarks.roi import RoiBox, box_pixels, roi_boxes
from medexp.probes.images import (
    GREY,
    blur,
    keep_regions,
    mask_regions,
    mirror,
    pixel_boxes,
    png_bytes,
    store_derived,
)


def _gradient(mode: str = "L", size=(10, 8)) -> Image.Image:
    width, height = size
    values = (np.arange(height)[:, None] * 20 + np.arange(width)[None, :] * 3).astype(np.uint8)
    if mode == "RGB":
        values = np.stack([values, 255 - values, values // 2], axis=-1)
    return Image.fromarray(values)


def test_box_pixels_round_outwards_and_ignore_float_noise():
    assert box_pixels([0.25, 0.5, 0.75, 1.0], 8, 4) == (2, 2, 6, 4)
    assert box_pixels([0.3, 0.3, 0.7, 0.7], 10, 10) == (3, 3, 7, 7)  # 0.3*10 is 3.0000000000000004
    assert box_pixels([0.21, 0.0, 0.29, 0.1], 10, 10) == (2, 0, 3, 1)  # a sliver still covers its pixels
    assert box_pixels([0.99, 0.99, 1.0, 1.0], 10, 10) == (9, 9, 10, 10)


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_mask_fills_the_region_with_grey_and_keeps_the_rest(mode):
    image = _gradient(mode)
    box = (2, 1, 6, 5)
    out = np.asarray(mask_regions(image, [box]))
    source = np.asarray(image)
    inside = np.zeros(source.shape[:2], bool)
    inside[1:5, 2:6] = True
    assert out.shape == source.shape
    assert np.all(out[inside] == GREY)
    assert np.array_equal(out[~inside], source[~inside])
    assert np.array_equal(np.asarray(image), source)  # the input is untouched


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_roi_only_keeps_the_region_at_its_place_on_grey(mode):
    image = _gradient(mode)
    boxes = [(0, 0, 2, 2), (7, 5, 10, 8)]
    out = np.asarray(keep_regions(image, boxes))
    source = np.asarray(image)
    inside = np.zeros(source.shape[:2], bool)
    inside[0:2, 0:2] = True
    inside[5:8, 7:10] = True
    assert np.array_equal(out[inside], source[inside])
    assert np.all(out[~inside] == GREY)


def test_mask_and_keep_are_complementary():
    image = _gradient("RGB")
    box = [(3, 2, 8, 6)]
    masked, kept = np.asarray(mask_regions(image, box)), np.asarray(keep_regions(image, box))
    source = np.asarray(image)
    assert np.array_equal(np.where(masked == GREY, kept, masked)[masked != GREY], source[masked != GREY])


def test_mirror_reverses_columns():
    image = _gradient("RGB")
    out = np.asarray(mirror(image))
    source = np.asarray(image)
    assert np.array_equal(out, source[:, ::-1])
    assert np.array_equal(np.asarray(mirror(mirror(image))), source)


def test_other_modes_become_rgb():
    rgba = Image.new("RGBA", (4, 4), (10, 20, 30, 40))
    assert mask_regions(rgba, [(0, 0, 2, 2)]).mode == "RGB"
    assert np.asarray(mask_regions(rgba, [(0, 0, 2, 2)]))[3, 3].tolist() == [10, 20, 30]


def test_blur_sigma_zero_is_identity_and_negative_is_refused():
    image = _gradient()
    assert np.array_equal(np.asarray(blur(image, 0)), np.asarray(image))
    with pytest.raises(ValueError, match="sigma must be >= 0"):
        blur(image, -1)


@pytest.mark.parametrize("sigma", [2, 4, 8])
def test_blur_spreads_a_line_with_variance_sigma_squared(sigma):
    """A one-pixel vertical line keeps its mass and spreads with variance sigma^2 across."""
    size = 16 * sigma + 1
    pixels = np.zeros((size, size), np.uint8)
    pixels[:, size // 2] = 255
    profile = np.asarray(blur(Image.fromarray(pixels), sigma)).astype(float)[size // 2]
    offsets = np.arange(size) - size // 2
    assert profile.sum() == pytest.approx(255, rel=0.05)
    assert (profile * offsets**2).sum() / profile.sum() == pytest.approx(sigma**2, rel=0.1)
    assert profile[size // 2] == profile.max() and np.abs(profile - profile[::-1]).max() <= 1


@pytest.mark.parametrize("sigma", [2, 4, 8, 16])
def test_blur_is_within_a_few_grey_levels_of_the_exact_gaussian(sigma):
    """Pillow's three-box approximation against scipy's sampled Gaussian (nearest edges).

    Away from the borders the gap is at most 4 grey levels of 255, and on average well under one.
    """
    rng = np.random.default_rng(0)
    pixels = np.zeros((128, 128), np.uint8)
    pixels[:, :20] = 200
    pixels[40:60, 50:90] = 160
    pixels = (pixels + rng.integers(0, 50, pixels.shape)).astype(np.uint8)
    ours = np.asarray(blur(Image.fromarray(pixels), sigma)).astype(float)
    exact = np.clip(np.rint(ndimage.gaussian_filter(pixels.astype(float), sigma, mode="nearest")), 0, 255)
    inner = (slice(3 * sigma, -3 * sigma),) * 2
    assert np.abs(ours - exact)[inner].max() <= 4
    assert np.abs(ours - exact).mean() <= 1.5


def test_blur_keeps_a_constant_image_constant():
    flat = Image.new("RGB", (30, 20), (90, 120, 200))
    assert np.all(np.asarray(blur(flat, 8)) == np.array([90, 120, 200]))


def test_store_writes_each_image_once_under_its_sha256(tmp_path):
    image = mask_regions(_gradient("RGB"), [(1, 1, 4, 4)])
    first = store_derived(image, tmp_path, "case::roi_masked")
    data = first.read_bytes()
    assert first.name == f"{hashlib.sha256(data).hexdigest()}.png"
    assert data == png_bytes(image)
    mtime = first.stat().st_mtime_ns
    again = store_derived(mask_regions(_gradient("RGB"), [(1, 1, 4, 4)]), tmp_path, "other::roi_masked")
    assert again == first and again.stat().st_mtime_ns == mtime
    assert len(list(tmp_path.rglob("*.png"))) == 1
    assert np.array_equal(np.asarray(Image.open(first)), np.asarray(image))  # lossless
    assert not list(tmp_path.rglob("*.tmp"))


def test_roi_meta_shape_is_validated():
    meta = {"roi_boxes": [{"label": "lesion", "box_norm": [0.1, 0.2, 0.3, 0.4], "box_px": None}]}
    assert roi_boxes(meta) == [RoiBox("lesion", (0.1, 0.2, 0.3, 0.4))]
    with pytest.raises(ValueError, match="must satisfy 0 <= x0 < x1 <= 1"):
        roi_boxes({"roi_boxes": [{"label": "x", "box_norm": [0.5, 0.2, 0.3, 0.4]}]}, "ex1")
    with pytest.raises(ValueError, match="ex2: roi_boxes\\[0\\] must be a dict"):
        roi_boxes({"roi_boxes": [[0.1, 0.2, 0.3, 0.4]]}, "ex2")
    assert pixel_boxes(_gradient(), [[0.0, 0.0, 0.5, 0.5]]) == [(0, 0, 5, 4)]
