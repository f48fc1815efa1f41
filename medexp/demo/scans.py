"""Synthetic grayscale "scans" whose pixels carry the answer to every demo question.

The modality sets the texture and intensity style, the organ sets the shape, and lesions are
blobs drawn on one side of the organ. Sides are image directions (left = left half of the
picture, upper = top), measured from the organ's centre.

Rendering uses only uniform draws from ``numpy.random.default_rng(seed)`` and elementwise
arithmetic (no transcendental functions, no float reductions), and PNGs are encoded here with
stored deflate blocks, so the same spec gives the same bytes on every machine and with any
numpy, Pillow or zlib build.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

MODALITIES: tuple[str, ...] = ("CT", "MRI", "X-Ray", "Ultrasound")
ORGANS: tuple[str, ...] = ("brain", "lung", "liver", "kidney", "heart")
SIDES: tuple[str, ...] = ("left", "right", "upper", "lower")
MAX_LESIONS = 3
NUMBER_WORDS: tuple[str, ...] = ("zero", "one", "two", "three")  # a lesion count in words

Grid = np.ndarray
Painted = tuple[np.ndarray, np.ndarray, float]  # pixels in [0, 1], where lesions may sit, lesion level

_SECTOR_MARGIN = 0.12  # keeps blobs clearly inside one of the four direction sectors
_BLOB_GAP = 0.06  # free space between two blobs so that they can be counted
_MIN_RADIUS = 0.045


@dataclass(frozen=True)
class ScanSpec:
    """What a synthetic scan shows; ``seed`` only drives texture, jitter and blob placement."""

    modality: str
    organ: str
    lesion: bool = False
    lesion_side: str | None = None
    lesion_count: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.modality not in MODALITIES:
            raise ValueError(f"unknown modality {self.modality!r}; expected one of {MODALITIES}")
        if self.organ not in ORGANS:
            raise ValueError(f"unknown organ {self.organ!r}; expected one of {ORGANS}")
        if self.lesion:
            if self.lesion_side not in SIDES:
                raise ValueError(f"a lesion needs a side in {SIDES}, got {self.lesion_side!r}")
            if not 1 <= self.lesion_count <= MAX_LESIONS:
                raise ValueError(f"a lesion needs 1..{MAX_LESIONS} blobs, got {self.lesion_count}")
        elif self.lesion_side is not None or self.lesion_count != 0:
            raise ValueError("lesion_side and lesion_count must be None and 0 without a lesion")


@dataclass(frozen=True)
class ScanLayout:
    """Where things are on a drawn scan, in pixels ``[x0, y0, x1, y1]`` (origin top-left, x right,
    y down, exclusive ends): the organ's bounding box and each lesion blob's bounding box."""

    organ_box: tuple[int, int, int, int]
    lesion_boxes: tuple[tuple[int, int, int, int], ...]


def render_scan(spec: ScanSpec, size: int = 96) -> Image.Image:
    """Draw ``spec`` as a ``size`` x ``size`` grayscale (mode "L") image."""
    return draw_scan(spec, size)[0]


def draw_scan(spec: ScanSpec, size: int = 96) -> tuple[Image.Image, ScanLayout]:
    """Draw ``spec`` and say where its organ and lesions are (the demo's regions of interest)."""
    if size < 32:
        raise ValueError(f"size must be at least 32 pixels, got {size}")
    rng = np.random.default_rng(spec.seed)
    coords = (np.arange(size) + 0.5) * (2.0 / size) - 1.0
    x, y = np.meshgrid(coords, coords)  # y grows downwards, like image rows
    organ = _organ_mask(spec.organ, x, y, rng)
    painter = _PAINTERS[spec.modality]
    pixels, field, lesion_level = painter(x, y, organ, spec.organ, rng)
    lesions = []
    if spec.lesion:
        for bx, by, radius in _place_blobs(spec, x, y, organ & field, rng):
            blob = (x - bx) * (x - bx) + (y - by) * (y - by) <= radius * radius
            grain = (rng.random((size, size)) - 0.5) * 0.04
            pixels = np.where(blob, lesion_level + grain, pixels)
            lesions.append(_box(blob))
    levels = np.rint(np.clip(pixels, 0.0, 1.0) * 255.0).astype(np.uint8)
    return Image.fromarray(levels), ScanLayout(_box(organ), tuple(lesions))


def answer_of(rule: str, spec: ScanSpec, candidate: Any) -> str:
    """The answer ``rule`` gives about a scan (``candidate``: what a CLOSED question asks about)."""
    yes_no = {True: "yes", False: "no"}
    if rule == "modality":
        return spec.modality
    if rule in ("organ", "lesion_organ"):
        return spec.organ
    if rule == "status":
        return "abnormal" if spec.lesion else "normal"
    if rule == "finding":
        return "focal lesion" if spec.lesion else "no abnormality"
    if rule == "side":
        return str(spec.lesion_side)
    if rule == "count":
        return NUMBER_WORDS[spec.lesion_count]
    if rule == "has_lesion":
        return yes_no[spec.lesion]
    if rule == "is_healthy":
        return yes_no[not spec.lesion]
    if rule == "multiple":
        return yes_no[spec.lesion_count > 1]
    if rule == "modality_is":
        return yes_no[candidate == spec.modality]
    if rule == "organ_is":
        return yes_no[candidate == spec.organ]
    if rule == "side_is":
        return yes_no[candidate == spec.lesion_side]
    if rule == "count_is":
        return yes_no[candidate == spec.lesion_count]
    raise ValueError(f"unknown answer rule {rule!r}")


def _box(mask: np.ndarray) -> tuple[int, int, int, int]:
    rows, cols = np.nonzero(mask)
    return int(cols.min()), int(rows.min()), int(cols.max()) + 1, int(rows.max()) + 1


def png_bytes(image: Image.Image) -> bytes:
    """Encode a mode "L" image as PNG bytes that depend on the pixels alone.

    Stored (uncompressed) deflate blocks avoid depending on the zlib build, whose compressed
    output differs between implementations (zlib vs zlib-ng).
    """
    if image.mode != "L":
        raise ValueError(f"expected a mode 'L' image, got {image.mode!r}")
    width, height = image.size
    rows = np.asarray(image, dtype=np.uint8).reshape(height, width)
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rows], axis=1).tobytes()
    blocks = []
    limit = 0xFFFF
    for start in range(0, max(len(raw), 1), limit):
        chunk = raw[start : start + limit]
        final = 1 if start + limit >= len(raw) else 0
        blocks.append(struct.pack("<BHH", final, len(chunk), len(chunk) ^ 0xFFFF) + chunk)
    stream = b"\x78\x01" + b"".join(blocks) + struct.pack(">I", zlib.adler32(raw))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", stream) + _chunk(b"IEND", b"")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _organ_mask(organ: str, x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    scale = 0.94 + 0.08 * rng.random()
    u = (x - 0.06 * (rng.random() - 0.5)) / scale
    v = (y - 0.06 * (rng.random() - 0.5)) / scale
    if organ == "brain":
        return _ellipse(u, v, 0.0, 0.0, 0.58, 0.72)
    if organ == "lung":
        return _ellipse(np.abs(u), v, 0.37, 0.0, 0.31, 0.70)
    if organ == "liver":
        # a wedge: thick on the left, tapering to the right like the liver's left lobe
        u = u - 0.04  # centres the wedge's mass on the picture
        return _ellipse(u, v, 0.0, 0.0, 0.74, 0.68) & (np.abs(v) <= 0.72 - 0.3 * (u + 0.74))
    if organ == "kidney":
        # a bean: an ellipse with the hilum notch cut out of its right edge
        return _ellipse(u, v, 0.0, 0.0, 0.55, 0.74) & ~_ellipse(u, v, 0.58, 0.0, 0.2, 0.24)
    if organ == "heart":
        v = v - 0.09  # centres the heart's mass on the picture
        lobes = _ellipse(np.abs(u), v, 0.23, -0.22, 0.32, 0.32)
        apex = (v >= -0.22) & (v <= 0.66) & (np.abs(u) * 0.88 <= 0.55 * (0.66 - v))
        return lobes | apex
    raise ValueError(f"unknown organ {organ!r}")


def _ellipse(x: np.ndarray, y: np.ndarray, cx: float, cy: float, rx: float, ry: float) -> np.ndarray:
    dx = (x - cx) / rx
    dy = (y - cy) / ry
    return dx * dx + dy * dy <= 1.0


def _smooth_noise(rng: np.random.Generator, size: int, cells: int = 6) -> np.ndarray:
    """Low-frequency noise in [-1, 1]: a coarse uniform grid upsampled bilinearly."""
    grid = rng.random((cells + 1, cells + 1)) * 2.0 - 1.0
    t = (np.arange(size) + 0.5) * (cells / size)
    low = np.minimum(t.astype(np.int64), cells - 1)
    frac = t - low
    rows = grid[low] * (1.0 - frac)[:, None] + grid[low + 1] * frac[:, None]
    return rows[:, low] * (1.0 - frac)[None, :] + rows[:, low + 1] * frac[None, :]


def _grain(rng: np.random.Generator, size: int, amplitude: float) -> np.ndarray:
    return (rng.random((size, size)) - 0.5) * (2.0 * amplitude)


def _jitter(rng: np.random.Generator, value: float, spread: float = 0.03) -> float:
    return value + spread * (2.0 * rng.random() - 1.0)


def _paint_ct(x: Grid, y: Grid, organ: Grid, name: str, rng: np.random.Generator) -> Painted:
    size = x.shape[0]
    body = _ellipse(x, y, 0.0, 0.0, 0.95, 0.87)
    table = (y >= 0.91) & (y <= 0.95)
    soft = _jitter(rng, 0.30) + 0.05 * _smooth_noise(rng, size)
    tissue = _jitter(rng, 0.62) + 0.06 * _smooth_noise(rng, size)
    pixels = np.where(body, soft, np.where(table, 0.45, 0.02))
    pixels = np.where(organ, tissue, pixels) + np.where(body, _grain(rng, size, 0.03), 0.0)
    return pixels, np.ones_like(organ), 0.14


def _paint_mri(x: Grid, y: Grid, organ: Grid, name: str, rng: np.random.Generator) -> Painted:
    size = x.shape[0]
    body = _ellipse(x, y, 0.0, 0.0, 0.92, 0.84)
    inner = _ellipse(x, y, 0.0, 0.0, 0.85, 0.77)
    bias = 0.08 * x - 0.05 * y  # coil sensitivity: a smooth brightness ramp
    pixels = np.where(inner, _jitter(rng, 0.10), np.where(body, 0.88, 0.0))
    pixels = np.where(organ, _jitter(rng, 0.50) + bias, pixels) + _grain(rng, size, 0.01)
    return pixels, np.ones_like(organ), 1.0


def _paint_xray(x: Grid, y: Grid, organ: Grid, name: str, rng: np.random.Generator) -> Painted:
    size = x.shape[0]
    body = _ellipse(x, y, 0.0, 0.0, 0.93, 0.97)
    pixels = np.where(body, _jitter(rng, 0.28) + 0.04 * _smooth_noise(rng, size), 0.06)
    # aerated lung shows dark on a radiograph, solid organs show as soft-tissue density
    organ_level = 0.12 if name == "lung" else 0.50
    pixels = np.where(organ, _jitter(rng, organ_level), pixels)
    bone = body & (np.abs(x) <= 0.05)
    arc = 0.18 * x * x
    for k in range(7):
        rib = np.abs(y - (-0.74 + 0.22 * k) - arc) <= 0.022
        bone |= body & rib & (np.abs(x) >= 0.08) & (np.abs(x) <= 0.86)
    pixels = np.where(bone, _jitter(rng, 0.80), pixels) + _grain(rng, size, 0.02)
    return pixels, np.ones_like(organ), 0.95


def _paint_ultrasound(x: Grid, y: Grid, organ: Grid, name: str, rng: np.random.Generator) -> Painted:
    size = x.shape[0]
    depth = y + 1.3  # the probe sits above the picture, the beam fans out downwards
    fan = (depth > 0.0) & (np.abs(x) <= 0.85 * depth) & (x * x + depth * depth <= 2.25 * 2.25)
    speckle = rng.random((size, size))
    echo = (0.35 + 1.3 * speckle * speckle) * (1.0 - 0.11 * depth)
    pixels = np.where(organ, _jitter(rng, 0.64), _jitter(rng, 0.32)) * echo
    return np.where(fan, pixels, 0.0), fan, 0.05


_PAINTERS = {"CT": _paint_ct, "MRI": _paint_mri, "X-Ray": _paint_xray, "Ultrasound": _paint_ultrasound}


def _place_blobs(
    spec: ScanSpec, x: np.ndarray, y: np.ndarray, room: np.ndarray, rng: np.random.Generator
) -> list[tuple[float, float, float]]:
    """Centres and radii of ``lesion_count`` separate blobs inside ``room`` on the given side."""
    size = x.shape[0]
    rows, cols = np.nonzero(room)
    # integer sums keep the centre exact, hence identical on every machine
    cx = x[0, int(cols.sum()) // len(cols)]
    cy = y[int(rows.sum()) // len(rows), 0]
    # on the named side both of the organ's centre and of the picture's centre
    side = str(spec.lesion_side)
    sector = (_toward(side, x - cx, y - cy) >= _SECTOR_MARGIN) & (_toward(side, x, y) >= _SECTOR_MARGIN)
    radius = 0.075 + 0.025 * rng.random()
    while radius >= _MIN_RADIUS:
        fits = sector & _erode(room, int(np.ceil(radius * size / 2.0)) + 1)
        candidates = np.flatnonzero(fits)
        # a few random orders before shrinking: blobs must stay apart to be countable
        for _ in range(8):
            order = candidates[rng.permutation(len(candidates))]
            centres = _spread(order, x.ravel(), y.ravel(), 2.0 * radius + _BLOB_GAP, spec.lesion_count)
            if len(centres) == spec.lesion_count:
                return [(bx, by, radius) for bx, by in centres]
        radius *= 0.9
    raise RuntimeError(f"no room for {spec.lesion_count} lesion(s) in {spec}")


def _toward(side: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """How far each point lies inside the 90-degree sector facing ``side``."""
    if side == "left":
        return -u - np.abs(v)
    if side == "right":
        return u - np.abs(v)
    if side == "upper":
        return -v - np.abs(u)
    return v - np.abs(u)


def _spread(
    order: np.ndarray, xs: np.ndarray, ys: np.ndarray, separation: float, count: int
) -> list[tuple[float, float]]:
    """Greedily take points in ``order`` that keep ``separation`` from those already taken."""
    centres: list[tuple[float, float]] = []
    left = order
    while len(left) and len(centres) < count:
        bx, by = xs[left[0]], ys[left[0]]
        centres.append((float(bx), float(by)))
        dx, dy = xs[left] - bx, ys[left] - by
        left = left[dx * dx + dy * dy >= separation * separation]
    return centres


def _erode(mask: np.ndarray, reach: int) -> np.ndarray:
    """Pixels of ``mask`` whose neighbours ``reach`` pixels away (8 directions) are in it too."""
    padded = np.pad(mask, reach, constant_values=False)
    size = mask.shape[0]
    diagonal = int(round(reach * 0.7071))
    out = mask.copy()
    for dr, dc in ((reach, 0), (-reach, 0), (0, reach), (0, -reach)) + tuple(
        (sr * diagonal, sc * diagonal) for sr in (1, -1) for sc in (1, -1)
    ):
        out &= padded[reach + dr : reach + dr + size, reach + dc : reach + dc + size]
    return out
