"""SLAKE loader on the official release layout and on the hub layout (imgs.zip)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from medexp.benchmarks.slake import META_FIELDS, load_slake
from medexp.inspect import strata
from tests.benchmarks.upstream import SLAKE_ROWS, slake_records, write_slake

ENGLISH = [row for row in SLAKE_ROWS if row[2] == "en"]


@pytest.fixture
def release(tmp_path) -> Path:
    return write_slake(tmp_path / "Slake1.0")


def test_english_rows_in_file_order_with_qid_ids(release, tmp_path):
    bench = load_slake("slake", release, "test", tmp_path / "cache", languages=["en"])
    assert [ex.example_id for ex in bench.examples] == [f"slake::test::{row[0]}" for row in ENGLISH]
    assert [ex.position for ex in bench.examples] == list(range(len(ENGLISH)))
    # qids are not sorted in the file (12035 before 12001, 11800 last): the order is the file's
    assert [int(ex.example_id.rsplit("::", 1)[1]) for ex in bench.examples] == [11934, 12035, 12001, 11950, 11800]
    assert bench.skipped == []


def test_example_fields_come_from_the_record(release, tmp_path):
    bench = load_slake("slake", release, "test", tmp_path / "cache", languages=["en"])
    records = {record["qid"]: record for record in slake_records()}
    for example in bench.examples:
        record = records[int(example.example_id.rsplit("::", 1)[1])]
        assert example.question == record["question"] and example.answer == record["answer"]
        assert example.image == release / "imgs" / record["img_name"]
        assert example.options is None
        assert example.meta == {key: record[key] for key in META_FIELDS}
    assert set(bench.examples[0].meta) == {
        "answer_type", "content_type", "modality", "location", "base_type", "img_name", "q_lang"
    }


def test_strata_counts(release, tmp_path):
    bench = load_slake("slake", release, "test", tmp_path / "cache", languages=["en"])
    counts = strata(bench.examples)
    assert counts["answer_type"] == {"OPEN": 3, "CLOSED": 2}
    assert counts["modality"] == dict(Counter(row[5] for row in ENGLISH))
    assert counts["modality"] == {"CT": 2, "X-Ray": 2, "MRI": 1}
    assert counts["content_type"] == {"Organ": 1, "Abnormality": 1, "Modality": 1, "Position": 1, "Size": 1}
    assert counts["q_lang"] == {"en": 5} and counts["base_type"] == {"vqa": 5}


@pytest.mark.parametrize("languages,expected", [(["zh"], [11935, 12002, 11951]), (None, [row[0] for row in SLAKE_ROWS])])
def test_language_filter(release, tmp_path, languages, expected):
    bench = load_slake("slake", release, "test", tmp_path / "cache", languages=languages)
    assert [ex.example_id for ex in bench.examples] == [f"slake::test::{qid}" for qid in expected]


def test_max_examples_counts_english_rows(release, tmp_path):
    bench = load_slake("slake", release, "test", tmp_path / "cache", languages=["en"], max_examples=2)
    assert [ex.example_id for ex in bench.examples] == ["slake::test::11934", "slake::test::12035"]


def test_hub_layout_extracts_the_zip_once(tmp_path):
    release = write_slake(tmp_path / "hub", zipped=True)
    cache = tmp_path / "cache"
    first = load_slake("slake", release, "test", cache, languages=["en"])
    image = first.examples[0].image
    assert image.is_file() and cache in image.parents and image.parts[-3:] == ("imgs", "xmlab102", "source.jpg")
    archives = cache / "benchmarks" / "archives"
    assert [path.name.startswith("imgs-") for path in archives.iterdir()] == [True]  # no staging left
    stamp = image.stat().st_mtime_ns
    second = load_slake("slake", release, "test", cache, languages=["en"])
    assert second.examples == first.examples
    assert image.stat().st_mtime_ns == stamp  # reused, not extracted again


def test_interrupted_extraction_is_not_trusted(tmp_path):
    release = write_slake(tmp_path / "hub", zipped=True)
    cache = tmp_path / "cache"
    staging = cache / "benchmarks" / "archives" / ".imgs-deadbeef.tmp-1"
    staging.mkdir(parents=True)  # what a killed extraction leaves behind
    bench = load_slake("slake", release, "test", cache, languages=["en"])
    assert len(bench) == 5 and all(ex.image.is_file() for ex in bench.examples)


def test_missing_image_is_skipped_and_counted(tmp_path):
    release = write_slake(tmp_path / "s")
    (release / "imgs" / "xmlab7" / "source.jpg").unlink()
    bench = load_slake("slake", release, "test", tmp_path / "cache", languages=["en"])
    assert [skip.example_id for skip in bench.skipped] == ["slake::test::11950"]
    assert bench.skipped[0].kind == "missing image"
    assert len(bench) == 4 and [ex.position for ex in bench.examples] == [0, 1, 2, 3]


def test_missing_field_names_the_record(tmp_path):
    records = slake_records()
    del records[2]["qid"]
    release = write_slake(tmp_path / "s", records)
    with pytest.raises(ValueError, match=r"test\.json\[2\]: missing field\(s\) \['qid'\]"):
        load_slake("slake", release, "test", tmp_path / "cache", languages=["en"])


def test_not_a_list_and_missing_file(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    with pytest.raises(FileNotFoundError, match="no test.json"):
        load_slake("slake", root, "test", tmp_path / "cache")
    (root / "test.json").write_text(json.dumps({"qid": 1}))
    with pytest.raises(ValueError, match="expected a JSON list"):
        load_slake("slake", root, "test", tmp_path / "cache")


def test_no_images_folder_nor_zip(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    (root / "test.json").write_text(json.dumps(slake_records()))
    with pytest.raises(FileNotFoundError, match="imgs.zip"):
        load_slake("slake", root, "test", tmp_path / "cache")
