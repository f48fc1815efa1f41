"""VQA-RAD (Lau et al., 2018) from the authors' OSF release or from the hub parquet copy.

``format: vqa_rad`` reads either layout, told apart by what ``bench.root`` holds:

1. **The official release** (OSF, https://osf.io/89kps/): ``<root>/VQA_RAD Dataset Public.json``,
   a JSON list of 2,248 question records (qid, image_name, image_case_url, image_organ, answer,
   answer_type, question_type, question, phrase_type, evaluation, qid_linked_id, question_frame,
   question_relation, question_rephrase), the images in ``<root>/VQA_RAD Image Folder/`` or
   ``<root>/images/`` (or either folder as a ``.zip``, extracted once into the cache;
   ``bench.image_dir`` names another folder). Layout ``vqa_rad_osf``.
2. **The hub copy** ``flaviagiammarino/vqa-rad``: parquet shards read by
   :mod:`medexp.benchmarks.hf_parquet`, with its own row order and row-index ids. Used when
   ``bench.root`` is unset (fetched from ``bench.hub_id``) or holds parquet shards of the split.
   Layout ``hf_parquet``.

When the root holds both, the official release wins; ``format: hf_parquet`` forces the hub copy
and ``format: vqa_rad_osf`` the official release (which is not on the hub, so it needs
``bench.root``).

Official release, split rule: ``test`` is the rows whose ``phrase_type`` is ``test_freeform`` or
``test_para`` (451 rows: 272 CLOSED, 179 OPEN), ``train`` every other row (1,797), both in file
order. The example id is ``<name>::<split>::qid<qid>``: the ``qid`` prefix keeps it apart from
the hub copy's row indices, so the two copies never share an id and never share a cache entry. The
release's own ``qid`` (``10``, as LLaVA-Med's answer files write ``question_id``) is the example's
upstream id (meta ``upstream_id``), which records from other tools join by.
Question and answer are stripped text (the file has integer answers such as ``2``); a missing,
null or empty one is a flaw of the example, counted and named with the file, the row and its qid
(skipped when the task needs it, see :mod:`medexp.benchmarks.skips`); a row without a usable
qid, phrase_type or image_name, a repeated qid or a record that is not an object is skipped and
counted. Meta: ``answer_type``,
``image_organ``, ``question_type`` and ``phrase_type`` stripped (the file has ``"CLOSED "``),
and the file's own values of ``qid``, ``image_name``, ``image_case_url``, ``evaluation``,
``qid_linked_id`` (a string or a number), ``question_frame``, ``question_relation`` and
``question_rephrase`` (``"NULL"`` when there is none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.hf_parquet import HUB_LAYOUT
from medexp.benchmarks.images import image_folder
from medexp.benchmarks.records import (
    DUPLICATE_ID, RowProblem, SourceRow, assemble, problem_row, read_json, require_object, required_text, split_file,
    text_field,
)

RELEASE_JSON = "VQA_RAD Dataset Public.json"
IMAGE_DIRS = ("VQA_RAD Image Folder", "images")  # the release's folder name, and the common rename
OSF_LAYOUT = "vqa_rad_osf"
TEST_PHRASE_TYPES = frozenset({"test_freeform", "test_para"})
SPLITS = ("test", "train")
STRATA = ("answer_type", "image_organ", "question_type", "phrase_type")  # stripped
RAW_META = ("qid", "image_name", "image_case_url", "evaluation", "qid_linked_id",
            "question_frame", "question_relation", "question_rephrase")  # the file's own values


def load(bench_cfg, cache_dir: Path) -> Benchmark:
    """``format: vqa_rad``: the layout ``bench.root`` holds, or the hub copy when it is unset."""
    from medexp.benchmarks.hub import dataset_root

    if bench_cfg.root and detect_layout(dataset_root(bench_cfg, cache_dir, ()), bench_cfg) == OSF_LAYOUT:
        return load_osf(bench_cfg, cache_dir)
    return load_hub(bench_cfg, cache_dir)


def load_osf(bench_cfg, cache_dir: Path) -> Benchmark:
    """``format: vqa_rad_osf``: the official release under ``bench.root``, nothing else."""
    if not bench_cfg.root:
        raise ValueError(
            f"bench={bench_cfg.name}: the official VQA-RAD release is not on the hub; download it from "
            f"https://osf.io/89kps/ and set bench.root to the folder holding {RELEASE_JSON!r}"
        )
    root = Path(bench_cfg.root).expanduser()
    return load_release(bench_cfg.name, root, bench_cfg.split, Path(cache_dir), bench_cfg.image_dir, bench_cfg.max_examples,
                        bench_cfg.allow_outside_root)


def load_hub(bench_cfg, cache_dir: Path) -> Benchmark:
    """The hub parquet copy (``bench.root`` or ``bench.hub_id``), read as ``format: hf_parquet`` reads it."""
    from medexp.benchmarks import hf_parquet

    benchmark = hf_parquet.load(bench_cfg, cache_dir)
    benchmark.layout = HUB_LAYOUT
    return benchmark


def detect_layout(root: Path, bench_cfg) -> str:
    """``vqa_rad_osf`` when ``root`` holds the release JSON, ``hf_parquet`` when it holds parquet
    shards of the split, else an error naming both and what the folder holds."""
    from medexp.benchmarks.hf_parquet import release_or_hub_layout

    release = f"the official VQA-RAD release ({RELEASE_JSON!r} beside {IMAGE_DIRS[0]!r}/)"
    try:
        return release_or_hub_layout(root, RELEASE_JSON, OSF_LAYOUT, bench_cfg.split, release)
    except FileNotFoundError as error:
        raise FileNotFoundError(f"bench={bench_cfg.name}: {error}") from None


def load_release(
    name: str,
    root: Path,
    split: str,
    cache_dir: Path,
    image_dir: str | None = None,
    max_examples: int | None = None,
    allow_outside_root: bool = False,
) -> Benchmark:
    """Read the official release's ``split`` (test or train) in file order."""
    if split not in SPLITS:
        raise ValueError(
            f"bench={name}: the official VQA-RAD release has splits {list(SPLITS)} "
            f"(test = phrase_type in {sorted(TEST_PHRASE_TYPES)}), not {split!r}"
        )
    path = split_file(name, root, RELEASE_JSON)
    records = read_json(path, list, "a JSON list of question records")
    images = image_folder(root, image_dir or release_image_dir(root), cache_dir)
    benchmark = assemble(name, split, _rows(records, path, images, split), max_examples, images, allow_outside_root,
                         [path])
    benchmark.layout = OSF_LAYOUT
    return benchmark


def release_image_dir(root: Path) -> str:
    """The first of :data:`IMAGE_DIRS` present under ``root`` as a folder or a zip."""
    for name in IMAGE_DIRS:
        if (root / name).is_dir() or (root / f"{name}.zip").is_file():
            return name
    raise FileNotFoundError(
        f"no VQA-RAD image folder under {root}: expected one of {list(IMAGE_DIRS)} (or the same name "
        f"with .zip); set bench.image_dir=<folder> if yours is named otherwise"
    )


def _rows(records: list, path: Path, images: Path, split: str) -> Iterator[SourceRow]:
    seen: dict[str, int] = {}
    for index, record in enumerate(records):
        where = f"{path}: row {index}"
        try:
            record = require_object(record, where, "a question record")
            qid = required_text(record, "qid", where)
        except RowProblem as problem:
            yield problem_row(problem, where)
            continue
        where = f"{where} (qid {record['qid']!r})"
        first = seen.setdefault(qid, index)  # qids are unique across both splits
        try:
            phrase_type = required_text(record, "phrase_type", where)
            if (phrase_type in TEST_PHRASE_TYPES) != (split == "test"):
                continue
            if first != index:
                raise RowProblem(f"{DUPLICATE_ID}: {where}: qid {qid} already used by row {first}")
            image = images / required_text(record, "image_name", where)
        except RowProblem as problem:
            yield problem_row(problem, where, f"qid{qid}" if first == index else None)
            continue
        flaws: dict[str, str] = {}
        yield SourceRow(
            source_id=f"qid{qid}",
            upstream_id=record["qid"],  # the release's own qid (an integer in the file), as other tools name it
            question=text_field(record, "question", where, flaws),
            answer=text_field(record, "answer", where, flaws),
            image=image,
            meta={**{key: _stripped(record.get(key)) for key in STRATA}, **{key: record.get(key) for key in RAW_META}},
            where=where,
            flaws=flaws,
        )


def _stripped(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value
