"""The manifest an export writes beside its files, and the check that replies answer its probes.

``manifest-<format>.json`` (one per format, so that the same probes exported for a second harness
into the same folder leave the first's manifest in place) holds what the export is (format, cell
key, bench, detector, control, seed), the probe set's content hash
(:func:`medexp.answers.cache.probe_set_hash`: ids, questions, options, golds, meta and each image's
bytes), the probes per arm, the answer settings that rendered them, the format's options, every
file written (the images among them) with its SHA-256, and the overrides that rebuild the same
probe set on import.

On import the cell rebuilds its probe set and compares hashes: a reply file whose manifest (given
as ``model.responses_manifest``, else the format's manifest found beside the reply file or in a
folder above it) or whose rows name another probe set are refused, naming both hashes. A probe id
alone proves nothing: the same ids under another seed hold other option orders.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from medexp.answers.formats.base import MANIFEST

KIND = "medexp_export"  # the key that tells an export's manifest from other files named manifest.json
VERSION = 1
SEARCH_LEVELS = 4  # folders above a reply file searched for the export's manifest


class ProbeSetMismatch(ValueError):
    """Replies made for another probe set than the cell's."""


@dataclass(frozen=True)
class Manifest:
    format: str
    probe_set: str
    cell_key: str
    bench: str
    detector: str
    control: str
    seed: int
    n_probes: int
    arms: dict[str, int]
    n_images: int
    answer: dict[str, Any]
    files: dict[str, str]  # path relative to the export folder -> SHA-256
    rebuild: list[str]  # the overrides that make the same probe set (give them to the import)
    skipped: dict[str, int] = field(default_factory=dict)  # probes the cell could not make, by reason
    medexp_version: str = ""
    options: dict[str, Any] = field(default_factory=dict)  # the format's options the files were written with

    def write(self, out: Path) -> Path:
        from medexp.answers.formats.base import write_text

        path = out / manifest_name(self.format)
        text = json.dumps({KIND: VERSION, **asdict(self)}, indent=2, ensure_ascii=False) + "\n"
        write_text(path, text)
        return path


def read_manifest(path: str | Path) -> Manifest:
    """The manifest at ``path``; a ValueError naming the file when it is not an export's manifest."""
    path = Path(path)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a readable export manifest ({error})") from error
    if not isinstance(record, dict) or record.get(KIND) != VERSION:
        raise ValueError(f"{path}: not a medexp export manifest (no {KIND}: {VERSION})")
    record.pop(KIND)
    try:
        return Manifest(**record)
    except TypeError as error:
        raise ValueError(f"{path}: an export manifest with other fields than this medexp writes ({error})") from error


def manifest_name(fmt: str) -> str:
    """The file name of format ``fmt``'s manifest in an export folder."""
    return MANIFEST.format(format=fmt)


def manifests_in(folder: Path) -> list[Path]:
    """The export manifests of every format in ``folder``."""
    return sorted(folder.glob(manifest_name("*")))


def find_manifest(replies: str | Path, fmt: str) -> Optional[Path]:
    """Format ``fmt``'s export manifest beside the reply file (or in the reply folder), or in a
    folder up to :data:`SEARCH_LEVELS` above it; None when there is none. Other files of that name
    are passed over."""
    path = Path(replies).resolve()
    folder = path if path.is_dir() else path.parent
    for candidate in [folder, *folder.parents][: SEARCH_LEVELS + 1]:
        manifest = candidate / manifest_name(fmt)
        if manifest.is_file():
            try:
                read_manifest(manifest)
            except ValueError:
                continue
            return manifest
    return None


def check_probe_set(expected: str, found: str, source: str) -> None:
    """Refuse replies whose ``source`` (a manifest, a row) names another probe set than the cell's
    (a task or dataset name carries the hash's first 8 digits)."""
    if len(found) < 8 or not expected.startswith(found):
        raise ProbeSetMismatch(
            f"{source} answers probe set {found}, and this cell's probe set is {expected}: the replies were made for "
            "other probes (another bench, detector, control or seed; the export's manifest lists "
            "the overrides that rebuild its probe set)")
