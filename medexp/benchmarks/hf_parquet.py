"""Hugging Face hub parquet datasets (``format: hf_parquet``), e.g. path-vqa and vqa-rad.

Layout (the hub's, local copies keep it): parquet shards of a split named ``<split>-*.parquet``
or ``<split>.parquet`` in any folder (usually ``data/``), or any ``*.parquet`` inside a folder
named after the split (the hub's ``refs/convert/parquet`` branch). Shards are read in the
lexicographic order of their paths (the hub numbers them ``-00000-of-000NN``), rows in file order,
one row group at a time, so a capped read touches only the start of the split. The shards of a
split lie in one folder: shards of the same split in two folders under the root are two copies
(a stale download in a subfolder), an error naming both; the shards read are logged and listed
on the benchmark (``Benchmark.files``, printed by ``medexp.inspect``).

Columns: ``image`` (the datasets ``Image`` feature, a struct of ``bytes`` and ``path``),
``question`` and ``answer`` (an empty or null one is a flaw of the example, counted; see
:mod:`medexp.benchmarks.skips`); any other column goes to ``meta``. There is no id column: the id is
the row's index within the split. ``ClassLabel`` columns are decoded to their names using the
``huggingface`` schema metadata the datasets library writes. Image bytes are written once into
the content-addressed image store under ``<cache_dir>/benchmarks/images``.

The image-set and OmniMedVQA loaders read parquet through the same functions.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Collection, Iterator, Optional

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.images import MISSING_IMAGE, image_store, store_image_bytes
from medexp.benchmarks.records import SourceRow, assemble, text_field

IMAGE_COLUMN = "image"
HUB_LAYOUT = "hf_parquet"  # the layout name of a hub parquet copy, beside an authors' release
_VQA_COLUMNS = ("question", "answer", IMAGE_COLUMN)


def split_patterns(split: str) -> list[str]:
    """huggingface_hub ``allow_patterns`` that cover every shard naming :func:`in_split` accepts."""
    return [f"*{split}-*.parquet", f"*{split}.parquet", f"*{split}/*.parquet"]


def in_split(relative_path: str, split: str) -> bool:
    """Whether a parquet file (path relative to the dataset root, '/'-separated) holds ``split``."""
    path = PurePosixPath(relative_path)
    if path.suffix != ".parquet" or any(part.startswith(".") for part in path.parts):
        return False
    return path.name == f"{split}.parquet" or path.name.startswith(f"{split}-") or split in path.parts[:-1]


class ParquetShard:
    """One parquet file of a split, opened on first use (a local path or a hub file)."""

    def __init__(self, name: str, opener: Callable[[], Any]):
        self.name = name  # path relative to the dataset root, for messages
        self._opener = opener

    @functools.cached_property
    def file(self):
        """The ``pyarrow.parquet.ParquetFile`` (reading it fetches only the footer)."""
        import pyarrow.parquet as pq

        return pq.ParquetFile(self._opener())

    @property
    def num_rows(self) -> int:
        return self.file.metadata.num_rows

    @property
    def columns(self) -> list[str]:
        return self.file.schema_arrow.names


def local_shards(root: Path, split: str) -> list[ParquetShard]:
    """The split's parquet files under ``root``, in path order; an error when there are none or
    when they lie in more than one folder (:func:`one_copy`)."""
    relative = sorted(path.relative_to(root).as_posix() for path in root.rglob("*.parquet"))
    chosen = [name for name in relative if in_split(name, split)]
    if not chosen:
        raise FileNotFoundError(
            f"no parquet files of split {split!r} under {root} "
            f"(expected <dir>/{split}-*.parquet, {split}.parquet or {split}/*.parquet; found {relative[:5]})"
        )
    one_copy(chosen, split, str(root))
    return [ParquetShard(name, functools.partial(str, root / name)) for name in chosen]


def release_or_hub_layout(root: Path, release_file: str, release_layout: str, split: str, release: str) -> str:
    """``release_layout`` when ``root`` holds the authors' ``release_file``, :data:`HUB_LAYOUT` when
    it holds parquet shards of ``split``, else an error naming both (``release`` describes the
    authors' files) and what the folder holds: how a format reading both copies tells them apart."""
    if (root / release_file).is_file():
        return release_layout
    try:
        local_shards(root, split)
    except FileNotFoundError:
        found = sorted(path.name for path in root.iterdir())[:10]
        raise FileNotFoundError(
            f"bench.root={root} holds neither {release} nor hub parquet shards of split {split!r} "
            f"(<dir>/{split}-*.parquet); it holds {found}"
        ) from None
    return HUB_LAYOUT


def one_copy(names: list[str], split: str, where: str) -> None:
    """Refuse shards of one split found in several folders (relative '/'-separated ``names``):
    the hub writes a split's shards side by side, so a second folder is a second copy."""
    folders: dict[str, list[str]] = {}
    for name in names:
        folders.setdefault(PurePosixPath(name).parent.as_posix(), []).append(name)
    if len(folders) > 1:
        copies = "; ".join(f"{folder}/ ({len(files)} file(s): {', '.join(files[:3])})" for folder, files in folders.items())
        raise ValueError(
            f"{where}: split {split!r} has parquet files in {len(folders)} folders, which would read the split "
            f"{len(folders)} times: {copies}. Remove the stale copy or point bench.root at one of them."
        )


def class_names(shard: ParquetShard) -> dict[str, list[str]]:
    """Names of the ``ClassLabel`` columns, from the schema metadata the datasets library writes."""
    metadata = shard.file.schema_arrow.metadata or {}
    info = json.loads(metadata.get(b"huggingface", b"{}")).get("info", {})
    return {
        column: feature["names"]
        for column, feature in info.get("features", {}).items()
        if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" and "names" in feature
    }


def read_rows(shards: list[ParquetShard], keep: Optional[Collection[int]] = None) -> Iterator[tuple[int, dict]]:
    """``(row index in the split, row)`` in file and row order, one row group at a time.

    With ``keep``, only those row indices are yielded, row groups holding none of them are not
    read, and reading stops after the last kept row. ``ClassLabel`` values become their names.
    """
    keep = frozenset(keep) if keep is not None else None
    last = max(keep, default=-1) if keep is not None else None
    start = 0
    for shard in shards:
        if last is not None and start > last:
            return
        labels = class_names(shard)
        for group in range(shard.file.num_row_groups):
            size = shard.file.metadata.row_group(group).num_rows
            indices = range(start, start + size)
            start += size
            if keep is not None and not any(index in keep for index in indices):
                continue
            for index, row in zip(indices, shard.file.read_row_group(group).to_pylist()):
                if keep is None or index in keep:
                    yield index, _decode_labels(row, labels)
            if last is not None and start > last:
                return


def _decode_labels(row: dict, labels: dict[str, list[str]]) -> dict:
    for column, names in labels.items():
        value = row.get(column)
        if isinstance(value, int):
            row[column] = names[value] if 0 <= value < len(names) else None  # -1 marks "no label"
    return row


def require_columns(shard: ParquetShard, columns: Collection[str]) -> None:
    """Fail naming the shard, the missing columns and the ones it has."""
    missing = [column for column in columns if column not in shard.columns]
    if missing:
        raise ValueError(f"{shard.name}: missing column(s) {missing} (has {shard.columns})")


def image_fields(value: Any, root: Optional[Path], cache_dir: Path, label: str) -> dict[str, Any]:
    """The :class:`SourceRow` image fields for a datasets ``Image`` value (struct of bytes, path)."""
    value = value or {}
    if value.get("bytes"):
        path, problem = store_image_bytes(value["bytes"], image_store(cache_dir), label)
        return {"image": path, "problem": problem, "image_checked": path is not None}
    if value.get("path") and root is not None:  # a file reference instead of embedded bytes
        return {"image": root / value["path"]}
    return {"problem": f"{MISSING_IMAGE}: {label} has no image bytes"}


def scalar_meta(row: dict, exclude: Collection[str]) -> dict[str, Any]:
    """The row's other columns as meta (nested values and raw bytes are left out)."""
    return {
        key: value
        for key, value in row.items()
        if key not in exclude and (value is None or isinstance(value, (str, int, float, bool)))
    }


def _vqa_rows(shards: list[ParquetShard], root: Path, cache_dir: Path) -> Iterator[SourceRow]:
    for index, row in read_rows(shards):
        flaws: dict[str, str] = {}
        yield SourceRow(
            source_id=index,
            question=text_field(row, "question", f"row {index}", flaws),
            answer=text_field(row, "answer", f"row {index}", flaws),
            meta=scalar_meta(row, _VQA_COLUMNS),
            where=f"row {index}",
            flaws=flaws,
            **image_fields(row[IMAGE_COLUMN], root, cache_dir, f"row {index}"),
        )


def shard_paths(root: Path, shards: list[ParquetShard]) -> list[Path]:
    """The shards' files, for ``Benchmark.files``."""
    return [Path(root) / shard.name for shard in shards]


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load a ``format: hf_parquet`` VQA split from ``bench.root`` or the hub."""
    from medexp.benchmarks.hub import dataset_root

    root = dataset_root(bench_cfg, cache_dir, split_patterns(bench_cfg.split))
    shards = local_shards(root, bench_cfg.split)
    require_columns(shards[0], _VQA_COLUMNS)
    rows = _vqa_rows(shards, root, Path(cache_dir))
    return assemble(bench_cfg.name, bench_cfg.split, rows, bench_cfg.max_examples, root, bench_cfg.allow_outside_root,
                    shard_paths(root, shards))
