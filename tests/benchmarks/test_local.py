"""The generic JSONL (``local``) benchmark loader and Benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medexp.benchmarks.base import Benchmark, Example
from medexp.benchmarks.images import image_problem
from medexp.benchmarks.local import load_local
from medexp.benchmarks.skips import IMAGE_TASK, QUESTION_TASK, requiring
from medexp.demo.scans import ScanSpec, png_bytes, render_scan


def write_scan(path: Path, seed: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(render_scan(ScanSpec("CT", "lung", seed=seed), size=32)))


def write_jsonl(path: Path, rows: list) -> None:
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def bench_root(tmp_path):
    """Seven lines with ids in non-sorted order; line 3 has a missing image, line 5 a corrupt one."""
    root = tmp_path / "bench"
    for name in ("a.png", "b.png", "d.png", "f.png"):
        write_scan(root / "images" / name, seed=len(name) + ord(name[0]))
    (root / "images" / "corrupt.png").write_bytes(np.random.default_rng(0).bytes(300))
    rows = [
        {"id": "z9", "question": "Q one?", "answer": "yes", "image": "images/a.png", "organ": "lung", "difficulty": 2},
        {"id": "003", "question": "Q two?", "answer": "no", "image": "images/b.png", "options": ["yes", "no"]},
        {"id": "m1", "question": "Q three?", "answer": "CT", "image": "images/missing.png"},
        {"id": "a0", "question": "Q four?", "answer": "left", "image": "images/d.png"},
        {"id": "k5", "question": "Q five?", "answer": "MRI", "image": "images/corrupt.png"},
        {"id": "b2", "question": "Text only?", "answer": "two"},
        {"id": 7, "question": "Q seven?", "answer": 3, "image": "images/f.png", "source": "web"},
    ]
    write_jsonl(root / "test.jsonl", rows)
    return root


def test_loads_in_released_order_and_skips_bad_images(bench_root):
    bench = load_local("mybench", bench_root, "test")
    ids = [ex.example_id for ex in bench.examples]
    assert ids == [
        "mybench::test::z9",
        "mybench::test::003",
        "mybench::test::a0",
        "mybench::test::b2",
        "mybench::test::7",
    ]
    assert [ex.position for ex in bench.examples] == list(range(5))
    assert len(bench) == 5
    assert [s.example_id for s in bench.skipped] == ["mybench::test::m1", "mybench::test::k5"]
    assert bench.skipped[0].reason.startswith("missing image") and "missing.png" in bench.skipped[0].reason
    assert bench.skipped[1].reason.startswith("corrupt image") and "corrupt.png" in bench.skipped[1].reason


def test_example_fields(bench_root):
    examples = {ex.example_id.split("::")[-1]: ex for ex in load_local("mybench", bench_root, "test").examples}
    first = examples["z9"]
    assert first.image == bench_root / "images" / "a.png"
    assert first.question == "Q one?" and first.answer == "yes"
    assert first.options is None
    assert first.meta == {"upstream_id": "z9", "organ": "lung", "difficulty": 2}  # the file's id, as records name it
    assert examples["003"].options == ("yes", "no")
    assert examples["003"].meta == {"upstream_id": "003"}
    assert examples["b2"].image is None
    assert examples["7"].answer == "3" and isinstance(examples["7"].answer, str)
    assert examples["7"].meta == {"upstream_id": "7", "source": "web"}


@pytest.mark.parametrize("n,kept,skipped", [(1, 1, 0), (3, 2, 1), (5, 3, 2), (7, 5, 2)])
def test_max_examples_reads_the_first_n_rows(bench_root, n, kept, skipped):
    # rows 3 and 5 have bad images: they count toward the cap ("first N rows") and are skipped
    full = load_local("mybench", bench_root, "test").examples
    bench = load_local("mybench", bench_root, "test", max_examples=n)
    assert bench.examples == full[:kept]
    assert [ex.position for ex in bench.examples] == list(range(kept))
    assert len(bench.skipped) == skipped


def test_max_examples_larger_than_file(bench_root):
    assert len(load_local("mybench", bench_root, "test", max_examples=100)) == 5


def test_blank_lines_are_ignored(tmp_path):
    write_jsonl(tmp_path / "dev.jsonl", ['{"id": 1, "question": "q", "answer": "a"}', "", "   ",
                                         '{"id": 2, "question": "q2", "answer": "b"}'])
    bench = load_local("x", tmp_path, "dev")
    assert [ex.example_id for ex in bench.examples] == ["x::dev::1", "x::dev::2"]


@pytest.mark.parametrize("missing", ["id", "question", "answer"])
def test_a_row_missing_a_field_is_skipped_naming_file_and_line(tmp_path, missing):
    row = {"id": "2", "question": "q", "answer": "a"}
    del row[missing]
    write_jsonl(tmp_path / "test.jsonl", [{"id": "1", "question": "q", "answer": "a"}, row])
    bench = requiring(load_local("x", tmp_path, "test"), QUESTION_TASK)
    assert [ex.example_id for ex in bench.examples] == ["x::test::1"]
    (skip,) = bench.skipped
    assert skip.kind == f"missing {missing}" and skip.example_id == (None if missing == "id" else "x::test::2")
    assert skip.reason == f"missing {missing}: {tmp_path / 'test.jsonl'}:2: {missing} is missing"
    assert skip.label == (f"{tmp_path / 'test.jsonl'}:2" if missing == "id" else "x::test::2")


def test_all_examples_skipped_raises(tmp_path):
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 20)
    write_jsonl(tmp_path / "test.jsonl", [
        {"id": "1", "question": "q", "answer": "a", "image": "nope.png"},
        {"id": "2", "question": "q", "answer": "a", "image": "bad.png"},
    ])
    with pytest.raises(ValueError, match="no examples"):
        load_local("x", tmp_path, "test")


def test_missing_split_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="test.jsonl"):
        load_local("x", tmp_path, "test")


def test_a_repeated_id_is_skipped_naming_the_id_and_both_lines(tmp_path):
    write_jsonl(tmp_path / "test.jsonl", [{"id": "7", "question": "q", "answer": "a"},
                                          {"id": "8", "question": "q", "answer": "a"},
                                          {"id": "7", "question": "q2", "answer": "b"}])
    bench = load_local("x", tmp_path, "test")
    assert [ex.question for ex in bench.examples] == ["q", "q"]
    (skip,) = bench.skipped
    assert skip.kind == "duplicate id" and "id '7'" in skip.reason
    assert f"{tmp_path / 'test.jsonl'}:3" in skip.reason and f"{tmp_path / 'test.jsonl'}:1" in skip.reason


@pytest.mark.parametrize("line,expected", [
    ('{"id": "2", "question": "q", "answer": "a"', "not JSON: Expecting ',' delimiter"),
    ('{"id": "2", "question": "q", "answer": "a"}}', "not JSON: Extra data"),
    ('["2", "q", "a"]', "not a JSON object: a JSON list"),
])
def test_a_malformed_line_is_skipped_naming_file_and_line(tmp_path, line, expected):
    write_jsonl(tmp_path / "test.jsonl", [{"id": "1", "question": "q", "answer": "a"}, "", line,
                                          {"id": "3", "question": "q", "answer": "a"}])
    bench = load_local("x", tmp_path, "test")
    assert [ex.example_id for ex in bench.examples] == ["x::test::1", "x::test::3"]
    (skip,) = bench.skipped
    assert skip.reason.startswith(f"malformed row: {tmp_path / 'test.jsonl'}:3: {expected}")


def test_non_utf8_bytes_are_skipped_naming_file_and_line(tmp_path):
    good = json.dumps({"id": "1", "question": "q", "answer": "a"}).encode()
    bad = '{"id": "2", "question": "caf'.encode() + b"\xe9" + b'", "answer": "a"}'
    (tmp_path / "test.jsonl").write_bytes(good + b"\n" + bad + b"\n")
    bench = load_local("x", tmp_path, "test")
    assert len(bench) == 1 and bench.skipped[0].reason.startswith(f"malformed row: {tmp_path / 'test.jsonl'}:2: not UTF-8: ")


@pytest.mark.parametrize("answer,problem", [(None, "missing answer: {where}: answer is null"),
                                            ("", "empty answer: {where}: answer is empty ('')"),
                                            ("   ", "empty answer: {where}: answer is empty ('   ')"),
                                            (["a"], "malformed answer: {where}: answer is a JSON list (['a'])")])
def test_null_or_empty_answers_are_flaws_never_text(tmp_path, answer, problem):
    write_jsonl(tmp_path / "test.jsonl", [{"id": "1", "question": "q", "answer": "a"},
                                          {"id": "2", "question": "q", "answer": answer}])
    read = load_local("x", tmp_path, "test")
    assert read.examples[1].answer == "" and read.flaws == {
        "x::test::2": {"answer": problem.format(where=f"{tmp_path / 'test.jsonl'}:2")}}
    bench = requiring(read, QUESTION_TASK)
    assert len(bench) == 1 and bench.skipped[0].reason == read.flaws["x::test::2"]["answer"]


def test_an_image_corpus_may_leave_question_and_answer_empty(tmp_path):
    write_scan(tmp_path / "images" / "a.png")
    rows = [{"id": "1", "question": "", "answer": "", "image": "images/a.png"}]
    write_jsonl(tmp_path / "corpus.jsonl", rows)
    (example,) = requiring(load_local("c", tmp_path, "corpus"), IMAGE_TASK).examples
    assert (example.question, example.answer, example.image.name) == ("", "", "a.png")
    with pytest.raises(ValueError, match="no examples .*empty question"):
        requiring(load_local("c", tmp_path, "corpus"), QUESTION_TASK)  # a benchmark row needs its question


def test_numeric_answers_keep_their_text(tmp_path):
    write_jsonl(tmp_path / "test.jsonl", [{"id": 1, "question": "How many?", "answer": 2}])
    (example,) = load_local("x", tmp_path, "test").examples
    assert example.answer == "2" and example.example_id == "x::test::1"


@pytest.mark.parametrize("image", ["../../../etc/passwd", "images/../../outside.png", "/etc/passwd"])
def test_image_paths_outside_the_root_are_refused(tmp_path, image):
    root = tmp_path / "bench"
    root.mkdir()
    write_scan(tmp_path / "outside.png")
    write_jsonl(root / "test.jsonl", [{"id": "1", "question": "q", "answer": "a", "image": image}])
    with pytest.raises(ValueError) as info:
        load_local("x", root, "test")
    message = str(info.value)
    assert f"{root / 'test.jsonl'}:1" in message and "outside the benchmark root" in message
    assert "allow_outside_root" in message


def test_a_symlink_leaving_the_root_is_refused_unless_allowed(tmp_path):
    root = tmp_path / "bench"
    write_scan(tmp_path / "elsewhere" / "scan.png")
    (root / "images").mkdir(parents=True)
    (root / "images" / "scan.png").symlink_to(tmp_path / "elsewhere" / "scan.png")
    write_jsonl(root / "test.jsonl", [{"id": "1", "question": "q", "answer": "a", "image": "images/scan.png"}])
    with pytest.raises(ValueError, match="outside the benchmark root"):
        load_local("x", root, "test")
    (example,) = load_local("x", root, "test", allow_outside_root=True).examples
    assert example.image == root / "images" / "scan.png"


def test_frame_columns(bench_root):
    frame = load_local("mybench", bench_root, "test").frame()
    assert list(frame.columns)[:4] == ["example_id", "position", "question", "answer"]
    assert set(frame.columns) == {"example_id", "position", "question", "answer", "upstream_id", "organ", "difficulty",
                                  "source"}
    assert frame["position"].tolist() == list(range(5))
    assert frame["example_id"].tolist()[0] == "mybench::test::z9"
    assert frame.loc[0, "organ"] == "lung"
    assert frame["answer"].tolist() == ["yes", "no", "left", "two", "3"]


def test_image_problem(tmp_path):
    good = tmp_path / "good.png"
    write_scan(good)
    assert image_problem(good) is None
    truncated = tmp_path / "truncated.png"
    truncated.write_bytes(good.read_bytes()[:-20])
    assert image_problem(truncated).startswith("corrupt image")
    assert image_problem(tmp_path / "absent.png").startswith("missing image")


def test_truncated_jpeg_is_skipped(tmp_path):
    pixels = (np.random.default_rng(0).random((64, 64, 3)) * 255).astype("uint8")
    full = tmp_path / "full.jpg"
    Image.fromarray(pixels).save(full, quality=90)
    (tmp_path / "cut.jpg").write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    with pytest.raises(OSError):  # the scorer cannot use it ...
        with Image.open(tmp_path / "cut.jpg") as image:
            image.convert("RGB")
    write_jsonl(tmp_path / "test.jsonl", [
        {"id": "ok", "question": "q", "answer": "a", "image": "full.jpg"},
        {"id": "cut", "question": "q", "answer": "a", "image": "cut.jpg"},
    ])
    bench = load_local("x", tmp_path, "test")  # ... so the loader must skip it
    assert [ex.example_id for ex in bench.examples] == ["x::test::ok"]
    assert [s.example_id for s in bench.skipped] == ["x::test::cut"]


def test_frame_meta_cannot_overwrite_position(tmp_path):
    write_jsonl(tmp_path / "test.jsonl", [
        {"id": "a", "question": "q", "answer": "x", "position": 41},
        {"id": "b", "question": "q", "answer": "y", "position": 40},
    ])
    bench = load_local("x", tmp_path, "test")
    assert [ex.position for ex in bench.examples] == [0, 1]
    assert bench.frame()["position"].tolist() == [0, 1]


def test_benchmark_rejects_empty():
    with pytest.raises(ValueError, match="no examples"):
        Benchmark(name="empty", examples=[])
    bench = Benchmark(name="one", examples=[Example("one::t::1", 0, None, "q", "a")])
    assert len(bench) == 1 and bench.skipped == []
