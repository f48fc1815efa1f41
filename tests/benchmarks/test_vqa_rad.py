"""VQA-RAD: the authors' OSF release (JSON + image folder) and the hub parquet copy, told apart by layout."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from medexp.benchmarks import TooManySkipped, expected_count, load_benchmark_from_config
from medexp.benchmarks.vqa_rad import load_release
from medexp.config import compose
from medexp.inspect import strata
from tests.benchmarks.upstream import (
    VQA_RAD_IMAGE_DIR, VQA_RAD_JSON, VQA_RAD_KEYS, VQA_RAD_ROWS, image_cells, vqa_rad_records,
    vqa_rad_release_records, write_hf_parquet, write_vqa_rad,
)

TEST_QIDS = [1, 3, 12, 4, 8, 10]  # file order of the test_freeform / test_para rows
TRAIN_QIDS = [0, 2, 5, 6, 7, 9]


@pytest.fixture
def release(tmp_path) -> Path:
    return write_vqa_rad(tmp_path / "VQA_RAD")


def load(root, cache, *overrides):
    return load_benchmark_from_config(compose(["bench=vqa_rad", f"bench.root={root}", *overrides]).bench, cache)


def qids(bench) -> list[int]:
    return [int(ex.example_id.rsplit("::qid", 1)[1]) for ex in bench.examples]


def test_fixture_is_the_release_format(release):
    records = json.loads((release / VQA_RAD_JSON).read_text())
    assert isinstance(records, list) and all(tuple(record) == VQA_RAD_KEYS for record in records)
    assert {type(record["answer"]) for record in records} == {str, int}
    assert {record["answer_type"] for record in records} == {"CLOSED", "CLOSED ", "OPEN", "OPEN "}
    assert {record["phrase_type"] for record in records} == {"freeform", "para", "test_freeform", "test_para"}
    assert {type(record["qid_linked_id"]) for record in records} == {str, int}
    assert sorted(path.name for path in (release / VQA_RAD_IMAGE_DIR).iterdir()) == sorted(
        {row[2] for row in VQA_RAD_ROWS})


def test_test_split_is_the_test_phrase_types_in_file_order(release, tmp_path):
    bench = load(release, tmp_path / "cache")
    assert bench.layout == "vqa_rad_osf"
    assert [ex.example_id for ex in bench.examples] == [f"vqa_rad::test::qid{qid}" for qid in TEST_QIDS]
    assert qids(bench) != sorted(qids(bench))  # file order, not qid order
    assert [ex.position for ex in bench.examples] == list(range(6))
    assert {ex.meta["phrase_type"] for ex in bench.examples} == {"test_freeform", "test_para"}
    assert bench.skipped == []


def test_train_split_is_every_other_row_in_file_order(release, tmp_path):
    bench = load_benchmark_from_config(compose(["bench=vqa_rad_train", f"bench.root={release}"]).bench, tmp_path / "c")
    assert [ex.example_id for ex in bench.examples] == [f"vqa_rad_train::train::qid{qid}" for qid in TRAIN_QIDS]
    assert {ex.meta["phrase_type"] for ex in bench.examples} == {"freeform", "para"}


def test_fields_answers_and_images(release, tmp_path):
    bench = load(release, tmp_path / "cache")
    rows = {row[0]: row for row in VQA_RAD_ROWS}
    for example in bench.examples:
        qid, _, image_name, *_, answer = rows[int(example.example_id.rsplit("qid", 1)[1])]
        assert example.question == f"Question {qid}: what does {image_name} show?"
        assert example.answer == str(answer)
        assert example.image == release / VQA_RAD_IMAGE_DIR / image_name
        assert example.options is None
    assert [ex.answer for ex in bench.examples][:2] == ["2", "2"]  # JSON integers become text


def test_strata_are_stripped(release, tmp_path):
    counts = strata(load(release, tmp_path / "cache").examples)
    assert counts["answer_type"] == {"CLOSED": 4, "OPEN": 2}  # qids 1 and 8 say "CLOSED "
    assert counts["image_organ"] == {"ABD": 3, "CHEST": 2, "HEAD": 1}  # qid 8 says "HEAD "
    assert counts["phrase_type"] == {"test_freeform": 4, "test_para": 2}
    assert counts["question_type"] == {"COUNT": 2, "MODALITY": 1, "PRES, POS": 1, "SIZE": 1, "PRES": 1}


def test_meta_keeps_the_files_own_values(release, tmp_path):
    bench = load(release, tmp_path / "cache")
    records = {record["qid"]: record for record in vqa_rad_records()}
    for example in bench.examples:
        record = records[example.meta["qid"]]
        for key in ("qid", "image_name", "image_case_url", "evaluation", "qid_linked_id", "question_frame",
                    "question_relation", "question_rephrase"):
            assert example.meta[key] == record[key] and type(example.meta[key]) is type(record[key])
    assert {type(ex.meta["qid_linked_id"]) for ex in bench.examples} == {str, int}
    assert "NULL" in {ex.meta["question_rephrase"] for ex in bench.examples}


@pytest.mark.parametrize("folder", [VQA_RAD_IMAGE_DIR, "images"])
def test_either_image_folder_name(tmp_path, folder):
    root = write_vqa_rad(tmp_path / "r", image_dir=folder)
    bench = load(root, tmp_path / "cache")
    assert [ex.image.parent for ex in bench.examples] == [root / folder] * 6
    assert all(ex.image.is_file() for ex in bench.examples)


def test_zipped_image_folder_is_extracted(release, tmp_path):
    folder = release / VQA_RAD_IMAGE_DIR
    with zipfile.ZipFile(release / f"{VQA_RAD_IMAGE_DIR}.zip", "w") as bundle:
        for path in folder.iterdir():
            bundle.write(path, f"{VQA_RAD_IMAGE_DIR}/{path.name}")
    shutil.rmtree(folder)
    bench = load(release, tmp_path / "cache")
    assert len(bench) == 6 and all(ex.image.is_file() and tmp_path / "cache" in ex.image.parents for ex in bench.examples)


def test_image_dir_override_and_no_folder(release, tmp_path):
    (release / VQA_RAD_IMAGE_DIR).rename(release / "synpic")
    with pytest.raises(FileNotFoundError, match=r"no VQA-RAD image folder under .*\['VQA_RAD Image Folder', 'images'\]"):
        load(release, tmp_path / "cache")
    bench = load(release, tmp_path / "cache", "bench.image_dir=synpic")
    assert all(ex.image.parent == release / "synpic" for ex in bench.examples)


def test_string_qids_and_the_row_cap(tmp_path):
    records = vqa_rad_records()
    records[1]["qid"] = "1"  # the export is not consistent about the qid's type
    root = write_vqa_rad(tmp_path / "r", records)
    bench = load(root, tmp_path / "cache", "bench.max_examples=2")
    assert [ex.example_id for ex in bench.examples] == ["vqa_rad::test::qid1", "vqa_rad::test::qid3"]
    assert bench.examples[0].meta["qid"] == "1"


def test_real_counts_at_full_scale(tmp_path):
    root = write_vqa_rad(tmp_path / "r", vqa_rad_release_records())
    test = load(root, tmp_path / "cache")
    assert len(test) == 451 and strata(test.examples)["answer_type"] == {"CLOSED": 272, "OPEN": 179}
    positions = [record["qid"] for record in vqa_rad_release_records()
                 if record["phrase_type"] in ("test_freeform", "test_para")]
    assert qids(test) == positions  # the 451 in file order
    train = load_release("vqa_rad", root, "train", tmp_path / "cache")
    assert len(train) == 1797 and not {ex.meta["qid"] for ex in train.examples} & set(positions)


# ------------------------------------------------------------------------ layouts and identity
def write_hub_copy(root: Path) -> Path:
    """The hub copy of the same test questions, in another order (no qid, ids are row indices)."""
    rows = [row for row in vqa_rad_records() if row["phrase_type"].startswith("test_")][::-1]
    write_hf_parquet(root / "data" / "test-00000-of-00001.parquet", {
        "image": image_cells(list(range(len(rows)))),
        "question": [row["question"] for row in rows],
        "answer": [str(row["answer"]).lower() for row in rows],
    })
    return root


def test_hub_layout_is_detected_and_its_ids_never_meet_the_releases(release, tmp_path):
    hub = load(write_hub_copy(tmp_path / "hub"), tmp_path / "cache")
    official = load(release, tmp_path / "cache")
    assert hub.layout == "hf_parquet" and official.layout == "vqa_rad_osf"
    assert [ex.example_id for ex in hub.examples] == [f"vqa_rad::test::{row}" for row in range(6)]
    assert sorted(ex.question for ex in hub.examples) == sorted(ex.question for ex in official.examples)
    assert not {ex.example_id for ex in hub.examples} & {ex.example_id for ex in official.examples}


def test_a_root_holding_both_reads_the_release_unless_told(release, tmp_path):
    write_hub_copy(release)
    assert load(release, tmp_path / "cache").layout == "vqa_rad_osf"
    forced = load(release, tmp_path / "cache", "bench.format=hf_parquet")
    assert forced.layout == "hf_parquet" and forced.examples[0].example_id == "vqa_rad::test::0"


def test_neither_layout_names_both(tmp_path):
    root = tmp_path / "empty"
    (root / "stuff").mkdir(parents=True)
    with pytest.raises(FileNotFoundError) as info:
        load(root, tmp_path / "cache")
    message = str(info.value)
    assert f"bench.root={root} holds neither the official VQA-RAD release ('{VQA_RAD_JSON}'" in message
    assert "nor hub parquet shards of split 'test'" in message and "['stuff']" in message


def test_explicit_osf_format(release, tmp_path):
    bench = load(release, tmp_path / "cache", "bench.format=vqa_rad_osf", "bench.hub_id=null")
    assert bench.layout == "vqa_rad_osf" and qids(bench) == TEST_QIDS
    with pytest.raises(FileNotFoundError, match=f"no {VQA_RAD_JSON} under"):
        load(write_hub_copy(tmp_path / "hub"), tmp_path / "cache", "bench.format=vqa_rad_osf", "bench.hub_id=null")
    cfg = compose(["bench=vqa_rad", "bench.format=vqa_rad_osf", "bench.hub_id=null"]).bench
    with pytest.raises(ValueError, match="not on the hub; download it from https://osf.io/89kps/"):
        load_benchmark_from_config(cfg, tmp_path / "cache")


# ------------------------------------------------------------------------------------- errors
def write_records(tmp_path, edit) -> Path:
    records = vqa_rad_records()
    edit(records)
    return write_vqa_rad(tmp_path / "r", records)


@pytest.mark.parametrize("edit,kind,message", [
    (lambda rs: rs[4].pop("answer"), "missing answer", r"row 4 \(qid 12\): answer is missing"),
    (lambda rs: rs[4].update(answer=None), "missing answer", r"row 4 \(qid 12\): answer is null"),
    (lambda rs: rs[4].update(answer="  "), "empty answer", r"row 4 \(qid 12\): answer is empty \('  '\)"),
    (lambda rs: rs[9].update(question=""), "empty question", r"row 9 \(qid 8\): question is empty"),
    (lambda rs: rs[9].update(question=None), "missing question", r"row 9 \(qid 8\): question is null"),
    (lambda rs: rs[9].update(answer=["Yes"]), "malformed answer", r"row 9 \(qid 8\): answer is a JSON list"),
    (lambda rs: rs[1].update(image_name=""), "empty image_name", r"row 1 \(qid 1\): image_name is empty"),
    (lambda rs: rs[3].pop("qid"), "missing qid", r"row 3: qid is missing"),
    (lambda rs: rs[3].pop("phrase_type"), "missing phrase_type", r"row 3 \(qid 3\): phrase_type is missing"),
    (lambda rs: rs[3].update(qid=None), "missing qid", r"row 3: qid is null"),
    (lambda rs: rs[9].update(qid=3), "duplicate id", r"row 9 \(qid 3\): qid 3 already used by row 3"),
    (lambda rs: rs.insert(2, "not a record"), "malformed row", r"row 2: expected a question record \(a JSON object\)"),
])
def test_bad_rows_are_skipped_naming_the_file_the_row_and_the_qid(tmp_path, edit, kind, message):
    root = write_records(tmp_path, edit)
    bench = load(root, tmp_path / "cache", "bench.max_skipped_share=1")
    (skip,) = bench.skipped
    assert skip.kind == kind
    assert re.match(f"{re.escape(kind)}: {re.escape(str(root / VQA_RAD_JSON))}: {message}", skip.reason), skip.reason
    assert len(bench) == (6 if kind == "malformed row" else 5)  # the inserted row is a seventh
    with pytest.raises(TooManySkipped, match=f"1 of {len(bench) + 1} rows skipped .*{re.escape(kind)}"):
        load(root, tmp_path / "cache")  # one bad row of six is far above the default 1%


def test_a_bad_training_row_does_not_touch_the_test_split(tmp_path):
    root = write_records(tmp_path, lambda rs: rs[0].update(answer=None))  # qid 0 is a training row
    assert qids(load(root, tmp_path / "cache")) == TEST_QIDS
    train = load(root, tmp_path / "cache", "bench.split=train", "bench.max_skipped_share=1")
    assert [skip.example_id for skip in train.skipped] == ["vqa_rad::train::qid0"]
    assert re.search(r"row 0 \(qid 0\): answer is null", train.skipped[0].reason)


def test_malformed_json_names_the_file_line_and_column(release, tmp_path):
    path = release / VQA_RAD_JSON
    lines = path.read_text().splitlines()
    lines[2] = lines[2].rstrip(",")  # drop the comma after the first record's first field (line 3)
    path.write_text("\n".join(lines))
    with pytest.raises(ValueError, match=r"VQA_RAD Dataset Public\.json: not valid JSON: Expecting ',' delimiter at line 4"):
        load(release, tmp_path / "cache")
    path.write_text(json.dumps({"rows": vqa_rad_records()}))
    with pytest.raises(ValueError, match="expected a JSON list of question records, got a JSON object"):
        load(release, tmp_path / "cache")


def test_byte_order_mark_is_accepted(release, tmp_path):
    path = release / VQA_RAD_JSON
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert qids(load(release, tmp_path / "cache")) == TEST_QIDS


def test_unknown_split(release, tmp_path):
    with pytest.raises(ValueError, match=r"has splits \['test', 'train'\] .*not 'validation'"):
        load(release, tmp_path / "cache", "bench.split=validation")


def test_expected_counts_by_config():
    counts = {name: expected_count(compose([f"bench={name}"]).bench) for name in ("vqa_rad", "vqa_rad_train")}
    assert counts == {"vqa_rad": 451, "vqa_rad_train": 1797}
    assert expected_count(compose(["bench=vqa_rad", "bench.split=train"]).bench) == 1797
