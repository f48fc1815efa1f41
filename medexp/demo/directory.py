"""Generated demo data directories: written once, atomically, and recognised when complete.

A generator fills a staging directory; a ``manifest.json`` (its identity, plus the SHA-256
of every JSONL file) is written last and the directory is renamed into place under a file lock
(:func:`medexp.kernel.atomic.build_directory_once`), so ``root`` either holds a complete data set or
does not exist, and concurrent processes generate it once. A complete directory with the same
identity is returned untouched; an outdated demo directory is replaced; anything that is not a
demo directory is never deleted.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Callable

from medexp.kernel.atomic import build_directory_once

MANIFEST = "manifest.json"
_DEMO_PREFIX = "demo-"  # every demo generator version starts with it


def build_once(
    root: Path, identity: dict[str, Any], n_images: int | None, write_into: Callable[[Path], None]
) -> Path:
    """Run ``write_into(tmp_dir)`` unless ``root`` already holds this data set; return ``root``.

    ``identity`` must contain ``generator`` (a version string starting with ``demo-``) and every
    setting that changes the output; ``n_images`` is the number of files ``images/`` (and its
    sub-folders) must hold; None when only the generator knows it: the count found after writing
    is recorded in the manifest and checked later.
    """
    root = Path(root)
    if not str(identity.get("generator", "")).startswith(_DEMO_PREFIX):
        raise ValueError(f"identity needs a generator version starting with {_DEMO_PREFIX!r}: {identity}")
    if _is_complete(root, identity, n_images):
        return root
    _remove_outdated(root)

    def build(staging: Path) -> dict[str, Any]:
        write_into(staging)
        digests = {path.name: _sha256(path) for path in sorted(staging.glob("*.jsonl"))}
        return {**identity, "sha256": digests, "images": _count_images(staging)}

    return build_directory_once(root, MANIFEST, build)


def read_manifest(root: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads((Path(root) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _count_images(root: Path) -> int:
    # images/ may hold class folders (the image_folder layout): every file below it counts
    images = root / "images"
    return sum(1 for path in images.rglob("*") if path.is_file()) if images.is_dir() else -1


def _is_complete(root: Path, identity: dict[str, Any], n_images: int | None) -> bool:
    manifest = read_manifest(root)
    if manifest is None or any(manifest.get(key) != value for key, value in identity.items()):
        return False
    digests = manifest.get("sha256") or {}
    if not digests:
        return False
    for name, digest in digests.items():
        path = root / name
        if not path.is_file() or _sha256(path) != digest:
            return False
    expected = manifest.get("images") if n_images is None else n_images
    return expected is not None and _count_images(root) == expected


def _remove_outdated(root: Path) -> None:
    """Delete an earlier demo data set at ``root``; refuse to delete anything else."""
    if not root.exists():
        return
    if root.is_dir() and not any(root.iterdir()):
        root.rmdir()
        return
    manifest = read_manifest(root)
    if manifest is None or not str(manifest.get("generator", "")).startswith(_DEMO_PREFIX):
        raise FileExistsError(f"{root} exists and is not a generated demo data set; refusing to overwrite it")
    shutil.rmtree(root)
