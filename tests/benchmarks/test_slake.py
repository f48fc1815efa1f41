"""SLAKE loader on the official release layout and on the hub layout (imgs.zip)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from medexp.benchmarks.slake import META_FIELDS, load_slake
from medexp.inspect import strata
from tests.benchmarks.upstream import SLAKE_ROWS, image_bytes, slake_records, write_file, write_slake

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
        assert {key: example.meta[key] for key in META_FIELDS} == {key: record[key] for key in META_FIELDS}
        assert example.meta["upstream_id"] == record["qid"]  # the release's own id, as other tools name it
    assert set(bench.examples[0].meta) == {
        "upstream_id", "answer_type", "content_type", "modality", "location", "base_type", "img_name", "q_lang",
        "roi_boxes", "roi_mask"
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


def test_a_record_missing_its_qid_or_image_is_skipped_naming_the_record(tmp_path):
    records = slake_records()
    del records[2]["qid"]
    del records[5]["img_name"]
    records[7]["answer"] = ""  # a flaw of the example: kept by the loader, skipped by a task needing answers
    release = write_slake(tmp_path / "s", records)
    bench = load_slake("slake", release, "test", tmp_path / "cache", languages=["en"])
    assert [(skip.example_id, skip.kind) for skip in bench.skipped] == [(None, "missing field"), ("slake::test::11950", "missing field")]
    assert bench.skipped[0].reason.startswith(f"missing field: {release / 'test.json'}[2]: missing field(s) ['qid']")
    assert bench.skipped[0].label == f"{release / 'test.json'}[2]"
    assert list(bench.flaws) == ["slake::test::11800"] and bench.flaws["slake::test::11800"]["answer"].startswith(
        f"empty answer: {release / 'test.json'}[7]: answer is empty")


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


# ---------------------------------------------------------------- region annotations (ROI meta)
# Hand-computed from SLAKE_DETECTIONS ({label: [x, y, w, h]}) and the image sizes (width, height):
# xmlab102 is 40x30: Liver [4, 3, 20, 12] -> corners [4, 3, 24, 15] -> [4/40, 3/30, 24/40, 15/30];
# Tumor [30, 20, 15, 15] -> [30, 20, 45, 35] overhangs -> [30/40, 20/30, 1, 1] (clipped).
# xmlab160 is 20x25: Left Lung [2, 5, 8, 10] -> [2, 5, 10, 15] -> [2/20, 5/25, 10/20, 15/25].
XMLAB102_BOXES = [
    {"label": "Liver", "box_px": [4, 3, 24, 15], "box_norm": [0.1, 0.1, 0.6, 0.5]},
    {"label": "Tumor", "box_px": [30, 20, 45, 35], "box_norm": [0.75, 20 / 30, 1.0, 1.0]},
]
XMLAB160_BOXES = [{"label": "Left Lung", "box_px": [2, 5, 10, 15], "box_norm": [0.1, 0.2, 0.5, 0.6]}]


def _roi(bench):
    return {ex.example_id.rsplit("::", 1)[1]: (ex.meta["roi_boxes"], ex.meta["roi_mask"]) for ex in bench.examples}


@pytest.mark.parametrize("zipped", [False, True])
def test_detection_boxes_and_masks_become_roi_meta(tmp_path, zipped):
    release = write_slake(tmp_path / "s", zipped=zipped)
    bench = load_slake("slake", release, "test", tmp_path / "cache", languages=["en"])
    folder = bench.examples[0].image.parent  # imgs/xmlab102, extracted from the zip for the hub layout
    roi = _roi(bench)
    assert roi["11934"] == roi["11800"] == (XMLAB102_BOXES, str(folder / "mask.png"))  # two questions, one image
    assert roi["12035"] == roi["12001"] == (XMLAB160_BOXES, None)  # boxes without a mask
    assert roi["11950"] == (None, None)  # xmlab7 has no annotation files
    assert bench.layout == ("slake_archive" if zipped else "slake_release")


def test_empty_detection_list_means_annotated_without_boxes(tmp_path):
    release = write_slake(tmp_path / "s")
    (release / "imgs" / "xmlab7" / "detection.json").write_text("[]")
    bench = load_slake("slake", release, "test", tmp_path / "cache", languages=["en"])
    assert _roi(bench)["11950"] == ([], None)


def test_image_missing_beside_its_detection_is_skipped_not_fatal(tmp_path):
    release = write_slake(tmp_path / "s")
    (release / "imgs" / "xmlab160" / "source.jpg").unlink()
    bench = load_slake("slake", release, "test", tmp_path / "cache", languages=["en"])
    assert [skip.example_id for skip in bench.skipped] == ["slake::test::12035", "slake::test::12001"]
    assert _roi(bench)["11934"] == (XMLAB102_BOXES, str(release / "imgs" / "xmlab102" / "mask.png"))


@pytest.mark.parametrize("content,message", [
    ('[{"Liver": [1, 2, 3, 4]', r"not valid JSON: .* at line 1, column 24"),
    ('{"Liver": [1, 2, 3, 4]}', r"expected a JSON list of \{label: \[x, y, w, h\]\} objects, got a JSON object"),
    ('[{"Liver": [1, 2, 3, 4], "Spleen": [1, 1, 2, 2]}]', r"item 0: expected one \{label: \[x, y, w, h\]\} object"),
    ('[{"Liver": [1, 2, 3, 4]}, ["Spleen", 1, 1, 2, 2]]', r"item 1: expected one \{label"),
    ('[{"Liver": [1, 2, 3]}]', r"item 0: 'Liver' needs \[x, y, w, h\], four numbers in pixels, got \[1, 2, 3\]"),
    ('[{"Liver": [1, "2", 3, 4]}]', r"item 0: 'Liver' needs \[x, y, w, h\]"),
    ('[{"Liver": [1, 2, true, 4]}]', r"item 0: 'Liver' needs \[x, y, w, h\]"),
    ('[{"Liver": [1, 2, -3, 4]}]', r"item 0: 'Liver' has a negative width or height"),
    ('[{" ": [1, 2, 3, 4]}]', r"item 0: the label is empty"),
    ('[{"Liver": [50, 2, 3, 4]}]', r"'Liver' box \[50, 2, 53, 6\] \(x0, y0, x1, y1\) lies outside the 40x30 image"),
])
def test_malformed_detection_json_names_the_file(tmp_path, content, message):
    release = write_slake(tmp_path / "s")
    detection = release / "imgs" / "xmlab102" / "detection.json"
    detection.write_text(content)
    with pytest.raises(ValueError, match=message) as info:
        load_slake("slake", release, "test", tmp_path / "cache", languages=["en"])
    assert str(detection) in str(info.value)


def test_malformed_split_json_names_the_file_and_line(tmp_path):
    root = tmp_path / "s"
    write_file(root / "test.json", b'[\n  {"qid": 1,\n   "question": }\n]')
    with pytest.raises(ValueError, match=r"test\.json: not valid JSON: Expecting value at line 3, column 16"):
        load_slake("slake", root, "test", tmp_path / "cache")


def test_annotations_are_read_once_per_image_folder(tmp_path, monkeypatch):
    from medexp.benchmarks import slake

    calls = []
    original = slake.detection_boxes
    monkeypatch.setattr(slake, "detection_boxes", lambda path: calls.append(path) or original(path))
    release = write_slake(tmp_path / "s")
    load_slake("slake", release, "test", tmp_path / "cache")  # 8 rows (both languages) about 3 images
    assert sorted(path.parent.name for path in calls) == ["xmlab102", "xmlab160"]


def test_boxes_follow_the_image_size(tmp_path):
    release = write_slake(tmp_path / "s")
    write_file(release / "imgs" / "xmlab160" / "source.jpg", image_bytes(5, "JPEG", (40, 50)))  # twice as large
    bench = load_slake("slake", release, "test", tmp_path / "cache", languages=["en"])
    assert _roi(bench)["12035"][0] == [{"label": "Left Lung", "box_px": [2, 5, 10, 15], "box_norm": [0.05, 0.1, 0.25, 0.3]}]
