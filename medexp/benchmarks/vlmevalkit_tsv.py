"""VLMEvalKit's TSV benchmarks (``format: vlmevalkit_tsv``): MMStar, RealWorldQA, MMBench and the
perturbed twins published in the same layout.

One tab-separated file with a header row (``<root>/<split>.tsv``, or ``bench.tsv_file``), written
by pandas (a field holding a tab, a quote or a newline is quoted). Columns:

* ``index``: the item's upstream id, unique in the file;
* ``question``;
* ``A``, ``B``, ...: the options in letter order. A row's options end at its first empty cell
  (RealWorldQA mixes two-, three- and four-option items in one file, the unused cells empty); a
  file without option columns holds open questions;
* ``answer``: on a row with options, the gold option's letter; the example's answer is that
  option's text and its options the option texts in letter order (the letter stays in meta as
  ``answer_letter``). On a row without options, the gold text;
* ``image``: the image as base64, decoded once into the content-addressed image store of the
  cache (written under a temporary name and renamed). A short value (64 characters or fewer) is
  the ``index`` of another row whose image it shares, as VLMEvalKit writes repeated images;
* ``image_path``, in files without base64 images (VLMEvalKit's localised copies): the image
  file. A relative path is under the TSV's folder; an absolute path written on another machine
  that starts with ``bench.image_root_from`` is moved under ``bench.image_root_to``. Every image
  file must resolve inside ``bench.root`` unless ``bench.allow_outside_root``;
* any other column (``hint``, ``category``, ``l2-category``, ``split`` ...) goes to meta, an
  empty cell as None.

Bad rows are counted, never fatal (see :mod:`medexp.benchmarks.skips`). A row whose index is
empty, whose cells outnumber the header, whose image is missing, does not decode or is a list of
several images (an example holds one image) is skipped. An option after an empty one ("option
gap": the row's options are unusable) and an answer letter that names no option of the row
("answer letter outside options": the gold is unknown) are flaws of the example, named with the
file and row: a task that needs options skips the first, every answering task the second; a
detector scoring free text keeps a row with a gap when its answer letter names a filled option,
and an image corpus keeps both. An empty question is a flaw too. The perturbed twins published
for MMStar and RealWorldQA (mm-perturb, ``MMStar_pert_local.tsv``) hold a few such rows among
their 1,500.
"""

from __future__ import annotations

import base64
import binascii
import csv
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterator, Optional

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.images import CORRUPT_IMAGE, MISSING_IMAGE, image_store, store_image_bytes
from medexp.benchmarks.options import LETTERS
from medexp.benchmarks.records import (
    MALFORMED_ROW, RowProblem, SourceRow, assemble, problem_row, required_text, split_file, text_field,
)

INDEX, QUESTION, ANSWER, IMAGE, IMAGE_PATH = "index", "question", "answer", "image", "image_path"
_REQUIRED = (INDEX, QUESTION, ANSWER)
# VLMEvalKit stores a repeated image once; later rows hold the first row's index (at most 64 characters).
_MAX_REFERENCE = 64
SEVERAL_IMAGES = "several images"
OPTION_GAP = "option gap"
ANSWER_OUTSIDE_OPTIONS = "answer letter outside options"
# A base64 image is a single field far beyond csv's default 128 KiB limit.
_FIELD_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class Rerooting:
    """Absolute image paths written under ``old`` on another machine, found under ``new`` here."""

    old: Optional[PurePosixPath]
    new: Optional[Path]

    def apply(self, value: str, folder: Path) -> Path:
        path = Path(value)
        if not path.is_absolute():
            return folder / path
        if self.old is not None and PurePosixPath(value).is_relative_to(self.old):
            return self.new / PurePosixPath(value).relative_to(self.old)
        return path


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """Load a ``format: vlmevalkit_tsv`` benchmark from ``bench.root``."""
    if not bench_cfg.root:
        raise ValueError(f"bench={bench_cfg.name}: set bench.root=/path/to/the/tsv/folder (format vlmevalkit_tsv)")
    root = Path(bench_cfg.root).expanduser()
    path = split_file(bench_cfg.name, root, bench_cfg.get("tsv_file") or f"{bench_cfg.split}.tsv")
    new_root = bench_cfg.get("image_root_to")
    rerooting = Rerooting(
        PurePosixPath(bench_cfg.image_root_from) if bench_cfg.get("image_root_from") else None,
        root / Path(new_root).expanduser() if new_root else None,  # an absolute image_root_to replaces root
    )
    rows = tsv_rows(path, image_store(Path(cache_dir)), rerooting)
    return assemble(bench_cfg.name, bench_cfg.split, rows, bench_cfg.max_examples, root, bench_cfg.allow_outside_root,
                    [path])


def tsv_records(path: Path) -> Iterator[tuple[str, dict[str, str] | RowProblem]]:
    """``("<file>: row <n>", record)`` for every data row, lazily; the header must name the
    required columns and an image column. A row with more cells than the header gives a
    :class:`~medexp.benchmarks.records.RowProblem` in place of its record."""
    csv.field_size_limit(_FIELD_LIMIT)
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        header = reader.fieldnames or []
        missing = [column for column in _REQUIRED if column not in header]
        if missing or not ({IMAGE, IMAGE_PATH} & set(header)):
            raise ValueError(f"{path}: not a VLMEvalKit TSV: missing column(s) {missing or [IMAGE + ' or ' + IMAGE_PATH]} "
                             f"(has {header})")
        try:
            for number, record in enumerate(reader, start=1):
                where = f"{path}: row {number}"
                if None in record:  # csv puts cells beyond the header under the key None
                    yield where, RowProblem(f"{MALFORMED_ROW}: {where}: {len(header) + len(record[None])} cells for "
                                            f"{len(header)} columns")
                    continue
                yield where, record
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None


def option_columns(header: list[str]) -> list[str]:
    """The option columns: A, B, ... in letter order, as far as the letters run unbroken."""
    columns = []
    for letter in LETTERS:
        if letter not in header:
            break
        columns.append(letter)
    return columns


def tsv_rows(path: Path, store: Path, rerooting: Rerooting) -> Iterator[SourceRow]:
    """The file's rows as :class:`SourceRow` records, in file order."""
    stored: dict[str, tuple[Optional[Path], Optional[str]]] = {}  # index -> (stored image, problem)
    later = _LaterImages(path, store)
    letters: Optional[list[str]] = None
    reserved: set[str] = set()
    for where, record in tsv_records(path):
        try:
            if isinstance(record, RowProblem):
                raise record
            index = required_text(record, INDEX, where)
        except RowProblem as problem:
            yield problem_row(problem, where)
            continue
        if letters is None:
            letters = option_columns(list(record))
            reserved = {*_REQUIRED, IMAGE, IMAGE_PATH, *letters}
        flaws: dict[str, str] = {}
        cells = [(record.get(letter) or "").strip() for letter in letters]
        options = _options(cells, letters, where, flaws)
        answer = text_field(record, ANSWER, where, flaws)
        meta = {key: (value if value.strip() else None) for key, value in record.items() if key not in reserved}
        if any(cells) and answer:
            meta["answer_letter"] = answer
            answer = _gold(answer, cells, options, where, flaws)
        yield SourceRow(source_id=index, question=text_field(record, QUESTION, where, flaws), answer=answer,
                        options=options or None, meta=meta, where=where, flaws=flaws,
                        **_image_fields(record, index, where, path, store, stored, later, rerooting))


def _options(cells: list[str], letters: list[str], where: str, flaws: dict[str, str]) -> tuple[str, ...]:
    """The row's options (A, B, ... up to the first empty cell); a filled cell after an empty one
    is a gap: the options are recorded as a flaw and none are returned."""
    count = cells.index("") if "" in cells else len(cells)
    if any(cells[count:]):
        late = next(letter for letter, value in zip(letters[count:], cells[count:]) if value)
        flaws["options"] = (f"{OPTION_GAP}: {where}: option {late} follows the empty option {letters[count]}; "
                            "a row's options fill A, B, ... without gaps")
        return ()
    return tuple(cells[:count])


def _gold(letter: str, cells: list[str], options: tuple[str, ...], where: str, flaws: dict[str, str]) -> str:
    """The text of the option the answer ``letter`` names (the cell itself when the options have a
    gap); ``""`` with the flaw recorded when it names no filled option of the row."""
    position = LETTERS.index(letter) if letter in LETTERS else len(cells)
    if position < len(cells) and cells[position] and (not options or position < len(options)):
        return cells[position]
    named = list(LETTERS[:len(options)]) if options else [l for l, cell in zip(LETTERS, cells) if cell]
    flaws["answer"] = f"{ANSWER_OUTSIDE_OPTIONS}: {where}: answer {letter!r} is not one of the row's option letters {named}"
    return ""


def _image_fields(record, index, where, path, store, stored, later, rerooting) -> dict:
    """The SourceRow image fields of one row (base64, a reference to another row, or a path)."""
    cell = (record.get(IMAGE) or "").strip()
    if cell:
        if cell.startswith("["):
            return {"problem": f"{SEVERAL_IMAGES}: {where} holds a list of images; an example holds one"}
        if len(cell) <= _MAX_REFERENCE:
            image, problem = stored[cell] if cell in stored else later.image(cell, where)
        else:
            image, problem = _store(cell, where, store)
            stored[index] = (image, problem)
        return {"image": image, "problem": problem, "image_checked": image is not None}
    file_cell = (record.get(IMAGE_PATH) or "").strip()
    if file_cell.startswith("["):
        return {"problem": f"{SEVERAL_IMAGES}: {where} holds a list of image paths; an example holds one"}
    if file_cell:
        return {"image": rerooting.apply(file_cell, path.parent)}
    return {"problem": f"{MISSING_IMAGE}: {where} has neither a base64 image nor an image_path"}


def _store(cell: str, where: str, store: Path) -> tuple[Optional[Path], Optional[str]]:
    try:
        data = base64.b64decode(cell, validate=True)
    except (binascii.Error, ValueError) as error:
        return None, f"{CORRUPT_IMAGE}: {where}: the image cell is not base64 ({error})"
    return store_image_bytes(data, store, where)


class _LaterImages:
    """The images of rows that a short image cell names before they appear (or never): found in
    one more pass over the file, made the first time such a reference is met, so reading stays
    linear in the file's size however many references it holds."""

    def __init__(self, path: Path, store: Path):
        self.path, self.store = path, store
        self.found: Optional[dict[str, tuple[Optional[Path], Optional[str]]]] = None

    def image(self, index: str, where: str) -> tuple[Optional[Path], Optional[str]]:
        if self.found is None:
            self.found = self._forward_targets()
        if index in self.found:
            return self.found[index]
        return None, f"{MISSING_IMAGE}: {where}: the image cell names row index {index!r}, which holds no base64 image"

    def _forward_targets(self) -> dict[str, tuple[Optional[Path], Optional[str]]]:
        """Each row whose base64 image an earlier short cell names, stored. A reference to a
        reference names no image (VLMEvalKit never writes one)."""
        wanted, seen, found = set(), set(), {}
        for where, record in tsv_records(self.path):
            if isinstance(record, RowProblem):  # skipped and counted by the main pass
                continue
            cell = (record.get(IMAGE) or "").strip()
            if not cell or cell.startswith("["):
                continue
            if len(cell) <= _MAX_REFERENCE:
                if cell not in seen:
                    wanted.add(cell)
                continue
            index = (record.get(INDEX) or "").strip()
            seen.add(index)
            if index in wanted and index not in found:
                found[index] = _store(cell, where, self.store)
        return found
