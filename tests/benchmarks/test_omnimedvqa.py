"""OmniMedVQA: the release's QA json files (and a parquet mirror of them), multiple choice."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from medexp.benchmarks import load_benchmark_from_config
from medexp.benchmarks.omnimedvqa import gold_answer
from medexp.config.schemas import BenchConfig
from tests.benchmarks.upstream import corrupt_bytes, image_bytes, write_file, write_hf_parquet


def qa(dataset, qid, answer, options, image, question_type="Modality Recognition", modality="CT"):
    record = {
        "dataset": dataset, "question_id": qid, "question_type": question_type,
        "question": f"What is shown in {qid}?", "gt_answer": answer, "image_path": image,
        "modality_type": modality,
    }
    record.update({f"option_{letter}": text for letter, text in zip("ABCD", options) if text is not None})
    return record


# File names sort differently from the order they are written in: files are read sorted.
FILES = {
    "RadImageNet.json": [
        qa("RadImageNet", "RadImageNet_0001", "C", ["Lung", "Liver", "Kidney", "Spleen"], "Images/RadImageNet/a.png"),
        qa("RadImageNet", "RadImageNet_0002", "Liver", ["Lung", "Liver", "Kidney"], "Images/RadImageNet/b.png"),
    ],
    "ACRIMA.json": [
        qa("ACRIMA", "ACRIMA_0002", "Glaucoma", ["Normal", "Glaucoma"], "Images/ACRIMA/2.png", "Disease Diagnosis", "Fundus Photography"),
        qa("ACRIMA", "ACRIMA_0001", "Normal", ["Normal", "Glaucoma"], "Images/ACRIMA/1.png", "Disease Diagnosis", "Fundus Photography"),
        qa("ACRIMA", "ACRIMA_0003", "B", ["Normal", "Glaucoma"], "Images/ACRIMA/broken.png", "Disease Diagnosis", "Fundus Photography"),
        qa("ACRIMA", "ACRIMA_0004", "(A)", ["Normal", "Glaucoma"], "Images/ACRIMA/4.png", "Disease Diagnosis", "Fundus Photography"),
    ],
}
ORDER = ["ACRIMA_0002", "ACRIMA_0001", "ACRIMA_0004", "RadImageNet_0001", "RadImageNet_0002"]


@pytest.fixture
def release(tmp_path):
    root = tmp_path / "OmniMedVQA"
    qa_dir = root / "QA_information" / "Open-access"
    qa_dir.mkdir(parents=True)
    for name, records in FILES.items():
        (qa_dir / name).write_text(json.dumps(records, indent=1))
        for seed, record in enumerate(records):
            data = corrupt_bytes(seed) if "broken" in record["image_path"] else image_bytes(seed)
            write_file(root / record["image_path"], data)
    return root


def cfg(root, **fields):
    # the fixture plants a corrupt image among a few rows: far above the default 1% of skipped rows
    return OmegaConf.merge(OmegaConf.structured(BenchConfig), {
        "name": "omnimedvqa", "format": "omnimedvqa", "split": "train", "root": str(root), "max_skipped_share": 0.5,
        **fields})


def test_files_sorted_rows_in_order_corrupt_image_skipped(release, tmp_path):
    bench = load_benchmark_from_config(cfg(release), tmp_path / "cache")
    assert [ex.example_id for ex in bench.examples] == [f"omnimedvqa::train::{qid}" for qid in ORDER]
    assert [ex.position for ex in bench.examples] == list(range(5))
    assert [(skip.example_id, skip.kind) for skip in bench.skipped] == [("omnimedvqa::train::ACRIMA_0003", "corrupt image")]
    assert "Images/ACRIMA/broken.png" in bench.skipped[0].reason


def test_options_and_gold_letters_map_to_text(release, tmp_path):
    examples = {ex.example_id.rsplit("::", 1)[1]: ex for ex in load_benchmark_from_config(cfg(release), tmp_path / "c").examples}
    letter = examples["RadImageNet_0001"]
    assert letter.options == ("Lung", "Liver", "Kidney", "Spleen")
    assert letter.answer == "Kidney" and letter.meta["answer_letter"] == "C"
    three = examples["RadImageNet_0002"]
    assert three.options == ("Lung", "Liver", "Kidney")  # option_D absent
    assert three.answer == "Liver" and three.meta["answer_letter"] == "B"
    assert examples["ACRIMA_0004"].answer == "Normal"  # "(A)"
    assert examples["ACRIMA_0002"].image == release / "Images" / "ACRIMA" / "2.png"
    assert examples["ACRIMA_0002"].meta == {
        "upstream_id": "ACRIMA_0002", "dataset": "ACRIMA", "question_type": "Disease Diagnosis", "modality_type": "Fundus Photography",
        "image_path": "Images/ACRIMA/2.png", "answer_letter": "B",
    }


@pytest.mark.parametrize("cap,expected_ids,skipped", [
    (2, ORDER[:2], 0),
    (3, ORDER[:2], 1),  # the third row is the corrupt one: it counts toward the cap
    (4, ORDER[:3], 1),
    (100, ORDER, 1),
])
def test_max_examples_caps_rows_in_order(release, tmp_path, cap, expected_ids, skipped):
    bench = load_benchmark_from_config(cfg(release, max_examples=cap), tmp_path / "cache")
    assert [ex.example_id.rsplit("::", 1)[1] for ex in bench.examples] == expected_ids
    assert len(bench.skipped) == skipped


def test_gold_letter_without_its_option_is_skipped_unless_the_task_needs_no_answer(tmp_path):
    root = tmp_path / "o"
    (root / "QA_information" / "Open-access").mkdir(parents=True)
    write_file(root / "Images/x.png", image_bytes(0))
    records = [qa("X", "X_1", "D", ["yes", "no"], "Images/x.png"), qa("X", "X_2", "no", ["yes", "no"], "Images/x.png")]
    (root / "QA_information" / "Open-access" / "X.json").write_text(json.dumps(records))
    bench = load_benchmark_from_config(cfg(root), tmp_path / "cache")
    assert [ex.example_id for ex in bench.examples] == ["omnimedvqa::train::X_2"]
    assert bench.skipped[0].kind == "unmatched answer" and "'D'" in bench.skipped[0].reason
    # an image corpus reads the row's image: the unknown gold does not matter there
    corpus = load_benchmark_from_config(cfg(root, image_only=True), tmp_path / "cache")
    assert [ex.example_id for ex in corpus.examples] == ["omnimedvqa::train::X_1", "omnimedvqa::train::X_2"]
    assert corpus.skipped == [] and corpus.examples[0].answer == ""


@pytest.mark.parametrize("gt,options,expected", [
    ("B", {"A": "x", "B": "y"}, ("y", "B")),
    (" y ", {"A": "x", "B": "y"}, ("y", "B")),
    ("B.", {"A": "x", "B": "y"}, ("y", "B")),
    ("A", {"A": "B", "B": "A"}, ("A", "B")),  # an option whose text is "A" wins over the letter
    ("free text", {}, ("free text", None)),
    ("Z", {"A": "x"}, ("Z", None)),
])
def test_gold_answer(gt, options, expected):
    assert gold_answer(gt, options) == expected


def test_a_row_missing_a_field_is_skipped_naming_it(tmp_path):
    root = tmp_path / "o"
    (root / "QA_information" / "Open-access").mkdir(parents=True)
    write_file(root / "Images" / "x.png", image_bytes(1))
    records = [qa("X", f"X_{k}", "yes", ["yes", "no"], "Images/x.png") for k in range(3)]
    del records[1]["gt_answer"], records[2]["image_path"]
    (root / "QA_information" / "Open-access" / "X.json").write_text(json.dumps(records))
    bench = load_benchmark_from_config(cfg(root, max_skipped_share=1), tmp_path / "cache")
    assert [ex.example_id for ex in bench.examples] == ["omnimedvqa::train::X_0"]
    reasons = {skip.kind: skip.reason for skip in bench.skipped}
    assert reasons["missing answer"] == f"missing answer: {root / 'QA_information/Open-access/X.json'}[1]: gt_answer is missing"
    assert "X.json[2]: missing field(s) ['image_path']" in reasons["missing field"] and len(bench.skipped) == 2


def test_parquet_mirror_gives_the_same_examples(release, tmp_path):
    """A parquet train split holding the release rows (file order) with embedded images."""
    rows = [record for name in sorted(FILES) for record in FILES[name]]
    images = [(release / record["image_path"]).read_bytes() for record in rows]
    columns = {key: [record.get(key) for record in rows] for key in rows[0] if key != "image_path"}
    columns["option_C"] = [record.get("option_C") for record in rows]
    columns["option_D"] = [record.get("option_D") for record in rows]
    columns["image"] = [{"bytes": data, "path": None} for data in images]
    columns["image_path"] = [record["image_path"] for record in rows]
    mirror = tmp_path / "mirror"
    write_hf_parquet(mirror / "data" / "train-00000-of-00001.parquet", columns)
    from_json = load_benchmark_from_config(cfg(release), tmp_path / "cache")
    from_parquet = load_benchmark_from_config(cfg(mirror), tmp_path / "cache")
    assert [ex.example_id for ex in from_parquet.examples] == [ex.example_id for ex in from_json.examples]
    for a, b in zip(from_parquet.examples, from_json.examples):
        assert (a.question, a.answer, a.options, a.meta) == (b.question, b.answer, b.options, b.meta)
        assert a.image.read_bytes() == b.image.read_bytes()
    assert [skip.example_id for skip in from_parquet.skipped] == [skip.example_id for skip in from_json.skipped]
