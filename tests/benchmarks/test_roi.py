"""The ROI meta shape shared by every benchmark: corners, normalisation, clipping."""

from __future__ import annotations

import pytest

from medexp.benchmarks.roi import corners_from_xywh, normalise_box, roi_entry


def test_corners_from_top_left_and_size():
    assert corners_from_xywh(77, 60, 129, 118) == [77, 60, 206, 178]
    assert corners_from_xywh(0.5, 1.5, 2.0, 0.0) == [0.5, 1.5, 2.5, 1.5]


def test_normalise_divides_x_by_width_and_y_by_height():
    # a 256 (wide) x 200 (tall) image: x over 256, y over 200
    assert normalise_box([77, 60, 206, 178], 256, 200) == [77 / 256, 60 / 200, 206 / 256, 178 / 200]
    assert normalise_box([0, 0, 256, 200], 256, 200) == [0.0, 0.0, 1.0, 1.0]


@pytest.mark.parametrize("box,expected", [
    ([-10, 5, 50, 120], [0.0, 0.05, 0.5, 1.0]),  # overhangs left and bottom
    ([90, -1, 130, 40], [0.9, 0.0, 1.0, 0.4]),  # overhangs right and top
])
def test_normalised_corners_are_clipped_to_the_image(box, expected):
    assert normalise_box(box, 100, 100) == pytest.approx(expected)


def test_entry_keeps_the_annotated_pixels_and_adds_normalised_corners():
    entry = roi_entry("Liver", (77, 60, 206, 278), (256, 256))
    assert entry == {"label": "Liver", "box_px": [77, 60, 206, 278], "box_norm": [77 / 256, 60 / 256, 206 / 256, 1.0]}
