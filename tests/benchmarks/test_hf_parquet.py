"""Hub parquet VQA splits (path-vqa / vqa-rad style) written by the datasets library."""

from __future__ import annotations

import hashlib

import datasets
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from medexp.benchmarks import load_benchmark_from_config
from medexp.benchmarks.hf_parquet import class_names, in_split, local_shards, read_rows
from medexp.config.schemas import BenchConfig
from tests.benchmarks.upstream import ROW_GROUP, image_bytes, image_cells, write_file, write_hf_parquet

# Two test shards: 6 + 5 rows; row 3 (shard 0) holds undecodable image bytes.
SHARDS = {"data/test-00000-of-00002.parquet": list(range(6)), "data/test-00001-of-00002.parquet": list(range(6, 11))}
CORRUPT_ROW = 3


def bench_cfg(root, **fields):
    # the fixture plants a corrupt image among eleven rows: far above the default 1% of skipped rows
    return OmegaConf.merge(OmegaConf.structured(BenchConfig), {
        "name": "pathvqa", "format": "hf_parquet", "root": str(root), "max_skipped_share": 0.5, **fields})


@pytest.fixture
def hub_copy(tmp_path):
    root = tmp_path / "path-vqa"
    for name, rows in SHARDS.items():
        corrupt = tuple(i for i, row in enumerate(rows) if row == CORRUPT_ROW)
        write_hf_parquet(root / name, {
            "image": image_cells(rows, corrupt=corrupt),
            "question": [f"what is shown in image {row}?" for row in rows],
            "answer": ["yes" if row % 2 else f"tissue {row}" for row in rows],
        })
    # another split's shard and a hidden download-cache file must be ignored
    write_hf_parquet(root / "data" / "train-00000-of-00001.parquet", {"image": image_cells([99]), "question": ["q"], "answer": ["a"]})
    write_file(root / ".cache" / "huggingface" / "test-0.parquet", b"not parquet")
    return root


def test_fixture_is_the_upstream_format(hub_copy):
    file = pq.ParquetFile(hub_copy / "data" / "test-00000-of-00002.parquet")
    assert str(file.schema_arrow.field("image").type) == "struct<bytes: binary, path: string>"
    assert b"huggingface" in file.schema_arrow.metadata
    assert file.num_row_groups == 2  # 6 rows in groups of ROW_GROUP=4


def test_rows_in_shard_order_with_row_index_ids(hub_copy, tmp_path):
    bench = load_benchmark_from_config(bench_cfg(hub_copy), tmp_path / "cache")
    kept = [row for row in range(11) if row != CORRUPT_ROW]
    assert [ex.example_id for ex in bench.examples] == [f"pathvqa::test::{row}" for row in kept]
    assert [ex.position for ex in bench.examples] == list(range(10))
    assert [ex.question for ex in bench.examples] == [f"what is shown in image {row}?" for row in kept]
    assert bench.examples[4].answer == "yes" and bench.examples[5].answer == "tissue 6"
    # the row index is the copy's own id, kept as the upstream id other tools' records join by
    assert all(ex.meta == {"upstream_id": row} and ex.options is None for ex, row in zip(bench.examples, kept))
    assert [(skip.example_id, skip.kind) for skip in bench.skipped] == [("pathvqa::test::3", "corrupt image")]


def test_images_are_extracted_content_addressed(hub_copy, tmp_path):
    cache = tmp_path / "cache"
    bench = load_benchmark_from_config(bench_cfg(hub_copy), cache)
    store = cache / "benchmarks" / "images"
    for example in bench.examples:
        row = int(example.example_id.rsplit("::", 1)[1])
        data = image_bytes(row)
        digest = hashlib.sha256(data).hexdigest()
        assert example.image == store / digest[:2] / f"{digest}.png"
        assert example.image.read_bytes() == data
    written = sorted(path for path in store.rglob("*") if path.is_file())
    assert len(written) == 10  # the corrupt bytes are not stored; no temp files remain
    stamps = [path.stat().st_mtime_ns for path in written]
    again = load_benchmark_from_config(bench_cfg(hub_copy), cache)
    assert again.examples == bench.examples
    assert [path.stat().st_mtime_ns for path in written] == stamps  # written once


def test_max_examples_reads_only_the_start(hub_copy, tmp_path):
    # the second shard is replaced by garbage: a capped read must never open it
    (hub_copy / "data" / "test-00001-of-00002.parquet").write_bytes(b"garbage")
    bench = load_benchmark_from_config(bench_cfg(hub_copy, max_examples=5), tmp_path / "cache")
    assert [ex.example_id for ex in bench.examples] == [f"pathvqa::test::{row}" for row in (0, 1, 2, 4)]
    assert len(bench.skipped) == 1


def test_extra_columns_and_class_labels_go_to_meta(tmp_path):
    root = tmp_path / "vqa-rad"
    write_hf_parquet(
        root / "data" / "test-00000-of-00001.parquet",
        {"image": image_cells([0, 1, 2]), "question": ["a?", "b?", "c?"], "answer": ["x", "y", "z"],
         "answer_type": [1, 0, -1], "phrase_type": ["freeform", "para", None]},
        features={"answer_type": datasets.ClassLabel(names=["OPEN", "CLOSED"])},
    )
    assert class_names(local_shards(root, "test")[0]) == {"answer_type": ["OPEN", "CLOSED"]}
    bench = load_benchmark_from_config(bench_cfg(root, name="vqa_rad"), tmp_path / "cache")
    assert [ex.meta for ex in bench.examples] == [
        {"upstream_id": 0, "answer_type": "CLOSED", "phrase_type": "freeform"},
        {"upstream_id": 1, "answer_type": "OPEN", "phrase_type": "para"},
        {"upstream_id": 2, "answer_type": None, "phrase_type": None},  # ClassLabel -1 means "no label"
    ]


def test_missing_column_is_named(tmp_path):
    root = tmp_path / "bad"
    write_hf_parquet(root / "test.parquet", {"image": image_cells([0]), "query": ["q"], "answer": ["a"]})
    with pytest.raises(ValueError, match=r"test\.parquet: missing column\(s\) \['question'\]"):
        load_benchmark_from_config(bench_cfg(root), tmp_path / "cache")


def test_no_shards_of_the_split(hub_copy, tmp_path):
    with pytest.raises(FileNotFoundError, match="no parquet files of split 'validation'"):
        load_benchmark_from_config(bench_cfg(hub_copy, split="validation"), tmp_path / "cache")


def test_row_without_image_bytes_is_skipped(tmp_path):
    root = tmp_path / "r"
    write_hf_parquet(root / "data" / "test-0.parquet", {
        "image": [{"bytes": image_bytes(0), "path": None}, None],
        "question": ["q0", "q1"], "answer": ["a0", "a1"],
    })
    bench = load_benchmark_from_config(bench_cfg(root), tmp_path / "cache")
    assert [ex.example_id for ex in bench.examples] == ["pathvqa::test::0"]
    assert bench.skipped[0].kind == "missing image"


@pytest.mark.parametrize("path,split,expected", [
    ("data/test-00000-of-00002.parquet", "test", True),
    ("data/test-00000-of-00001-1359597a978bc4fa.parquet", "test", True),
    ("test.parquet", "test", True),
    ("default/test/0000.parquet", "test", True),
    ("data/train-00000-of-00002.parquet", "test", False),
    ("data/latest-00000.parquet", "test", False),
    ("data/test-00000.json", "test", False),
    (".cache/huggingface/download/data/test-0.parquet", "test", False),
    ("data/validation-00000-of-00001.parquet", "validation", True),
])
def test_split_file_names(path, split, expected):
    assert in_split(path, split) is expected


def test_read_rows_keeps_only_the_requested_rows(hub_copy, monkeypatch):
    read = []
    original = pq.ParquetFile.read_row_group

    def spy(self, group, *args, **kwargs):
        read.append(group)
        return original(self, group, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy)
    shards = local_shards(hub_copy, "test")
    rows = list(read_rows(shards, keep={1, 2}))
    assert [index for index, _ in rows] == [1, 2]
    assert read == [0]  # rows 1 and 2 live in the first row group; nothing after it is read
    assert ROW_GROUP == 4
