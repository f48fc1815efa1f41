"""The VLMEvalKit TSV format on fixtures written as VLMEvalKit writes them: base64 images (with a
row sharing another row's image by index), image_path copies re-rooted from another machine,
options of varying count, and the errors that name the file and row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from medexp.benchmarks import load_benchmark
from tests.benchmarks.upstream import base64_image, corrupt_bytes, image_bytes, write_file, write_vlmevalkit_tsv

QUESTION = "What is shown in the image?"


def _rows_base64() -> list[dict]:
    return [
        {"index": 10, "question": QUESTION, "hint": "A chest radiograph.", "A": "nodule", "B": "effusion",
         "C": "normal", "D": "fracture", "answer": "B", "category": "finding", "l2-category": "chest",
         "image": base64_image(1)},
        # two options: the C and D cells are empty, as in RealWorldQA
        {"index": 11, "question": "Is the lesion on the left?", "A": "yes", "B": "no", "answer": "A",
         "category": "side", "image": base64_image(2, "JPEG")},
        # a repeated image is stored once: the cell holds the index of the row that has it
        {"index": 12, "question": "How many lesions?", "A": "one", "B": "two", "C": "three", "answer": "C",
         "category": "count", "image": "10"},
    ]


def _load(root: Path, cache: Path, **fields):
    return load_benchmark("mmstar_tsv", cache_dir=cache, root=root, **{"twin": None, **fields})


def test_base64_rows_become_examples_with_option_texts_and_stored_images(tmp_path):
    write_vlmevalkit_tsv(tmp_path / "data" / "MMStar.tsv", _rows_base64())
    bench = _load(tmp_path / "data", tmp_path / "cache")
    assert [ex.example_id for ex in bench.examples] == [f"mmstar_tsv::test::{i}" for i in (10, 11, 12)]
    first, second, third = bench.examples
    assert first.options == ("nodule", "effusion", "normal", "fracture") and first.answer == "effusion"
    assert second.options == ("yes", "no") and second.answer == "yes"
    assert third.options == ("one", "two", "three") and third.answer == "three"
    assert first.meta == {"upstream_id": "10", "hint": "A chest radiograph.", "category": "finding", "l2-category": "chest",
                          "answer_letter": "B"}
    assert second.meta["hint"] is None and second.meta["l2-category"] is None
    # decoded once into the content-addressed store; the referencing row shares the file
    store = tmp_path / "cache" / "benchmarks" / "images"
    assert first.image.is_relative_to(store) and first.image.read_bytes() == image_bytes(1)
    assert second.image.suffix == ".jpg" and third.image == first.image
    again = _load(tmp_path / "data", tmp_path / "cache")
    assert [ex.image for ex in again.examples] == [ex.image for ex in bench.examples]
    assert len(list(store.rglob("*.*"))) == 2


def test_a_reference_to_a_later_row_and_bad_images_are_handled(tmp_path):
    rows = _rows_base64()
    rows[0]["image"], rows[2]["image"] = "12", base64_image(1)  # the first row points forward
    rows.append({"index": 13, "question": QUESTION, "A": "a", "B": "b", "answer": "A",
                 "image": __import__("base64").b64encode(corrupt_bytes()).decode()})
    rows.append({"index": 14, "question": QUESTION, "A": "a", "B": "b", "answer": "A", "image": "['x', 'y']"})
    rows.append({"index": 15, "question": QUESTION, "A": "a", "B": "b", "answer": "A", "image": "99"})
    write_vlmevalkit_tsv(tmp_path / "data" / "MMStar.tsv", rows)
    bench = _load(tmp_path / "data", tmp_path / "cache", max_skipped_share=0.5)
    assert bench.examples[0].image.read_bytes() == image_bytes(1)
    assert [item.kind for item in bench.skipped] == ["corrupt image", "several images", "missing image"]
    assert "MMStar.tsv: row 4" in bench.skipped[0].reason


def _path_rows(prefix: str) -> list[dict]:
    return [
        {"index": 1, "question": QUESTION, "A": "x", "B": "y", "answer": "A",
         "image_path": f"{prefix}/images/MMStar/1.jpg"},
        {"index": 2, "question": QUESTION, "A": "x", "B": "y", "answer": "B", "image_path": "images/MMStar/2.jpg"},
    ]


def test_image_paths_are_rerooted_or_read_relative_to_the_tsv(tmp_path):
    root = tmp_path / "LMUData"
    write_file(root / "images" / "MMStar" / "1.jpg", image_bytes(1, "JPEG"))
    write_file(root / "images" / "MMStar" / "2.jpg", image_bytes(2, "JPEG"))
    write_vlmevalkit_tsv(root / "MMStar_local.tsv", _path_rows("/home/someone/LMUData"))
    bench = _load(root, tmp_path / "cache", tsv_file="MMStar_local.tsv",
                  image_root_from="/home/someone/LMUData", image_root_to=str(root))
    assert [ex.image for ex in bench.examples] == [root / "images/MMStar/1.jpg", root / "images/MMStar/2.jpg"]
    # a relative image_root_to is under root
    relative = _load(root, tmp_path / "cache", tsv_file="MMStar_local.tsv",
                     image_root_from="/home/someone/LMUData", image_root_to=".")
    assert relative.examples[0].image.resolve() == (root / "images/MMStar/1.jpg").resolve()
    # without re-rooting, the other machine's absolute path leaves the root: refused, with the way out
    with pytest.raises(ValueError, match=r"MMStar_local.tsv: row 1: image path .* outside the benchmark root"):
        _load(root, tmp_path / "cache", tsv_file="MMStar_local.tsv")


def test_rerooting_fields_go_together_and_belong_to_the_tsv_format(tmp_path):
    with pytest.raises(Exception, match="image_root_from and .*image_root_to go together"):
        _load(tmp_path, tmp_path / "cache", image_root_from="/old", image_root_to=None)
    with pytest.raises(ValueError, match=r"bench.tsv_file is only read by format\(s\) \['vlmevalkit_tsv'\]"):
        load_benchmark("local", cache_dir=tmp_path, root=tmp_path, tsv_file="x.tsv")


@pytest.mark.parametrize("change,kind,message", [
    ({"answer": "D"}, "answer letter outside options",
     r"row 2: answer 'D' is not one of the row's option letters \['A', 'B'\]"),
    ({"C": "late", "B": None}, "option gap", r"row 2: option C follows the empty option B"),
    ({"question": " "}, "empty question", r"row 2: question is empty"),
    ({"index": ""}, "empty index", r"row 2: index is empty"),
])
def test_malformed_rows_are_skipped_naming_file_and_row(tmp_path, change, kind, message):
    rows = _rows_base64()
    rows[1].update(change)
    write_vlmevalkit_tsv(tmp_path / "data" / "MMStar.tsv", rows)
    bench = _load(tmp_path / "data", tmp_path / "cache", max_skipped_share=0.5)
    assert [ex.example_id for ex in bench.examples] == ["mmstar_tsv::test::10", "mmstar_tsv::test::12"]
    (skip,) = bench.skipped
    assert skip.kind == kind and re.search(f"MMStar.tsv: {message}", skip.reason), skip.reason


def test_a_file_without_the_required_columns_is_refused(tmp_path):
    write_vlmevalkit_tsv(tmp_path / "data" / "MMStar.tsv", [{"index": 1, "question": QUESTION, "answer": "A"}])
    with pytest.raises(ValueError, match=r"not a VLMEvalKit TSV: missing column\(s\) \['image or image_path'\]"):
        _load(tmp_path / "data", tmp_path / "cache")


def test_reading_stays_linear_however_many_rows_name_another_rows_image(tmp_path, monkeypatch):
    """Every short image cell that names a later row (or none) used to re-read the whole file: 4,000
    rows of them took minutes. Now the file is read at most twice, whatever the references."""
    import medexp.benchmarks.vlmevalkit_tsv as tsv

    rows = [{"index": 0, "question": QUESTION, "A": "a", "B": "b", "answer": "A", "image": "3999"}]
    rows += [{"index": index, "question": QUESTION, "A": "a", "B": "b", "answer": "A",
              "image": str(3999 if index % 2 else 10_000 + index)} for index in range(1, 3999)]  # forward, dangling
    rows.append({"index": 3999, "question": QUESTION, "A": "a", "B": "b", "answer": "B", "image": base64_image(3)})
    write_vlmevalkit_tsv(tmp_path / "data" / "MMStar.tsv", rows)
    passes = []
    reader = tsv.tsv_records
    monkeypatch.setattr(tsv, "tsv_records", lambda path: passes.append(path) or reader(path))
    bench = _load(tmp_path / "data", tmp_path / "cache", max_skipped_share=0.5)  # half the rows dangle on purpose
    assert len(passes) == 2
    assert len(bench.examples) == 2001 and len(bench.skipped) == 1999
    assert {ex.image for ex in bench.examples} == {bench.examples[-1].image}
    assert bench.skipped[0].kind == "missing image" and "names row index '10002'" in bench.skipped[0].reason


def test_a_byte_order_mark_is_read(tmp_path):
    path = write_vlmevalkit_tsv(tmp_path / "data" / "MMStar.tsv", _rows_base64())
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert len(_load(tmp_path / "data", tmp_path / "cache").examples) == 3
