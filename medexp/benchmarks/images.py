"""Benchmark images: validation, a content-addressed store for embedded bytes, zip archives.

Images embedded in parquet rows become files once, named by the SHA-256 of their bytes, so the
same image is written once whatever benchmark or split it comes from. Only images that decode
are written, so a file in the store is known to be good. Archives (``imgs.zip``) are extracted
once into the cache; both kinds of write go to a temporary name first and are renamed into place,
so an interrupted run never leaves a partial file or folder that a later run would trust.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shutil
import zipfile
from pathlib import Path
from typing import Callable

from medexp.kernel.hashing import stable_hash

log = logging.getLogger(__name__)

MISSING_IMAGE = "missing image"
CORRUPT_IMAGE = "corrupt image"
_SUFFIXES = {"JPEG": ".jpg", "PNG": ".png", "GIF": ".gif", "BMP": ".bmp", "TIFF": ".tif", "WEBP": ".webp"}


def image_problem(path: Path) -> str | None:
    """Why an image file cannot be used (missing or undecodable), or None when it is fine."""
    if not path.is_file():
        return f"{MISSING_IMAGE}: {path}"
    problem = _decode_problem(lambda: _open_image(path))
    return f"{CORRUPT_IMAGE}: {path}: {problem}" if problem else None


def read_image(path: Path, mode: str):
    """Open an image file and convert it to ``mode``, naming the file if it cannot be read."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.convert(mode)
    except (OSError, UnidentifiedImageError, SyntaxError) as error:
        raise ValueError(f"cannot read image {path}: {error}") from error


def image_size(path: Path) -> tuple[int, int] | None:
    """``(width, height)`` from the file's header, or None when it is missing or not an image."""
    from PIL import UnidentifiedImageError

    try:
        with _open_image(path) as image:
            return image.size
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError):
        return None


def _open_image(source):
    from PIL import Image

    return Image.open(source)


def _decode_problem(open_image: Callable) -> str | None:
    """The decoder's complaint about an image, or None when it decodes completely."""
    from PIL import UnidentifiedImageError

    try:
        with open_image() as image:
            image.verify()  # structure and checksums
        with open_image() as image:
            image.load()  # full decode: verify() does not decode JPEG data
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        return str(error) or type(error).__name__
    return None


def image_store(cache_dir: Path) -> Path:
    """Where images extracted from parquet rows live (shared by every benchmark)."""
    return Path(cache_dir) / "benchmarks" / "images"


def store_image_bytes(data: bytes, store: Path, label: str) -> tuple[Path | None, str | None]:
    """Write decodable image bytes into the content-addressed store.

    Returns ``(path, None)`` for a good image and ``(None, reason)`` for bytes that do not decode;
    ``label`` names the image's origin in that reason.
    """
    from medexp.kernel.atomic import atomic_write_bytes

    digest = hashlib.sha256(data).hexdigest()
    existing = sorted((store / digest[:2]).glob(f"{digest}.*"))
    if existing:
        return existing[0], None
    problem = _decode_problem(lambda: _open_image(io.BytesIO(data)))
    if problem:
        return None, f"{CORRUPT_IMAGE}: {label}: {problem}"
    with _open_image(io.BytesIO(data)) as image:
        suffix = _SUFFIXES.get(image.format or "", ".img")
    path = store / digest[:2] / f"{digest}{suffix}"
    atomic_write_bytes(path, data)
    return path, None


def image_folder(root: Path, image_dir: str, cache_dir: Path) -> Path:
    """``<root>/<image_dir>``, or the extracted ``<root>/<image_dir>.zip`` when only the archive exists.

    In an archive, the images are looked for in ``<image_dir>/``, else in its only top-level
    folder, else at its top level.
    """
    folder = root / image_dir
    if folder.is_dir():
        return folder
    archive = root / f"{image_dir}.zip"
    if archive.is_file():
        extracted = extracted_archive(archive, cache_dir)
        # Archives hold the folder itself (imgs.zip -> imgs/...), a folder of another name, or
        # the images directly.
        if (extracted / image_dir).is_dir():
            return extracted / image_dir
        entries = list(extracted.iterdir())
        return entries[0] if len(entries) == 1 and entries[0].is_dir() else extracted
    raise FileNotFoundError(f"no image folder {folder} and no archive {archive}")


def extracted_archive(archive: Path, cache_dir: Path) -> Path:
    """Extract a zip archive once into the cache and return the folder holding its contents.

    The folder is keyed by the archive's resolved path, size and modification time, so a new
    download is extracted again; extraction happens in a staging folder renamed into place.
    """
    stat = archive.stat()
    key = stable_hash([str(archive.resolve()), stat.st_size, stat.st_mtime_ns])
    target = Path(cache_dir) / "benchmarks" / "archives" / f"{archive.stem}-{key}"
    if target.is_dir():
        return target
    staging = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log.info("extracting %s into %s (once; later loads reuse it)", archive, target)
    try:
        with zipfile.ZipFile(archive) as bundle:
            bundle.extractall(staging)  # zipfile drops absolute and ".." parts of member names
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if target.is_dir():  # a concurrent extraction finished first
            return target
        raise
    return target
