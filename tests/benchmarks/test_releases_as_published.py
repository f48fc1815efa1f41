"""Releases read as their authors publish them (issue 22): bad rows skipped and counted through one
mechanism, fields a task does not need never required, images compared whatever the question
filter, PathVQA's own files with dedup, one copy of a split per root, the published twin TSVs,
and each split compared with its own expected count."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from medexp.benchmarks import TooManySkipped, expected_count, load_benchmark, load_benchmark_from_config
from medexp.benchmarks.skips import IMAGE_TASK, OPEN_TASK, QUESTION_TASK, requiring, skip_metrics
from medexp.config import compose
from tests.benchmarks.upstream import (
    MMSTAR_ANSWER_OUTSIDE, MMSTAR_ITEMS, MMSTAR_OPTION_GAP, SLAKE_EMPTY_ANSWER_QID, SLAKE_TEST_IMAGE_CHINESE_IN_TRAIN,
    SLAKE_TRAIN_ENGLISH, image_cells, mmstar_pert_rows, pathvqa_records, slake_split_records, write_hf_parquet,
    write_mmstar_perturbed, write_pathvqa, write_slake_release,
)


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# ----------------------------------------------------------------------- the shared mechanism
def test_a_bad_row_is_skipped_by_reason_with_its_line_and_a_large_share_fails(tmp_path):
    rows = [{"id": f"q{i}", "question": f"question {i}?", "answer": "yes"} for i in range(200)]
    rows[17]["answer"] = ""
    rows[90]["question"] = None
    _write_jsonl(tmp_path / "test.jsonl", rows)
    bench = load_benchmark("local", cache_dir=tmp_path / "cache", root=tmp_path)
    assert len(bench) == 198 and [ex.position for ex in bench.examples] == list(range(198))
    assert [(skip.example_id, skip.kind) for skip in bench.skipped] == [
        ("local::test::q17", "empty answer"), ("local::test::q90", "missing question")]
    assert f"{tmp_path / 'test.jsonl'}:18" in bench.skipped[0].reason
    assert skip_metrics(bench.skipped) == {"n_skipped.empty_answer": 1.0, "n_skipped.missing_question": 1.0}
    assert bench.files == [str(tmp_path / "test.jsonl")]

    rows[100]["answer"] = "   "  # 3 of 200 rows: 1.5%, above the default 1%
    _write_jsonl(tmp_path / "test.jsonl", rows)
    with pytest.raises(TooManySkipped) as info:
        load_benchmark("local", cache_dir=tmp_path / "cache", root=tmp_path)
    message = str(info.value)
    assert "3 of 200 rows skipped (1.5%), more than bench.max_skipped_share=0.01" in message
    assert f"files: {tmp_path / 'test.jsonl'}" in message
    assert "reasons: {'empty answer': 2, 'missing question': 1}" in message
    assert "first rows: local::test::q17 (empty answer: " in message
    assert len(load_benchmark("local", cache_dir=tmp_path / "cache", root=tmp_path, max_skipped_share=0.02)) == 197


def test_a_field_the_task_does_not_need_is_not_required(tmp_path):
    rows = [{"id": "a", "question": "q?", "answer": ""}, {"id": "b", "question": "q?", "answer": "yes", "options": []},
            {"id": "c", "question": "q?", "answer": "no"}]
    _write_jsonl(tmp_path / "test.jsonl", rows)
    cfg = compose(["bench=local", f"bench.root={tmp_path}", "bench.max_skipped_share=1"]).bench
    ids = {needs: [ex.example_id.rsplit("::", 1)[1] for ex in load_benchmark_from_config(cfg, tmp_path, needs).examples]
           for needs in (QUESTION_TASK, OPEN_TASK, IMAGE_TASK)}
    assert ids == {QUESTION_TASK: ["c"], OPEN_TASK: ["b", "c"], IMAGE_TASK: ["a", "b", "c"]}
    open_task = load_benchmark_from_config(cfg, tmp_path, OPEN_TASK)
    assert open_task.examples[0].options is None and [ex.position for ex in open_task.examples] == [0, 1]
    assert open_task.flaws == {"local::test::b": {"options": open_task.flaws["local::test::b"]["options"]}}
    assert [skip.kind for skip in open_task.skipped] == ["empty answer"]
    with pytest.raises(ValueError, match="unknown example field"):
        requiring(open_task, frozenset({"image"}))


# ------------------------------------------------------------------------------------ SLAKE
@pytest.fixture
def slake_release(tmp_path):
    return write_slake_release(tmp_path / "Slake1.0")


def test_slake_train_skips_and_counts_the_empty_answer(slake_release, tmp_path):
    bench = load_benchmark("slake", cache_dir=tmp_path / "cache", root=slake_release, split="train")
    assert len(bench) == SLAKE_TRAIN_ENGLISH - 1
    (skip,) = bench.skipped
    assert skip.example_id == f"slake::train::{SLAKE_EMPTY_ANSWER_QID}" and skip.kind == "empty answer"
    assert skip.reason.startswith(f"empty answer: {slake_release / 'train.json'}[") and "answer is empty ('')" in skip.reason
    assert bench.outside_selection == frozenset()


def test_slake_as_an_image_corpus_reads_every_language(slake_release, tmp_path):
    cfg = compose(["bench=slake", f"bench.root={slake_release}", "bench.split=train"]).bench
    cfg.image_only = True
    corpus = load_benchmark_from_config(cfg, tmp_path / "cache")
    records = slake_split_records()["train"]
    assert len(corpus) == len(records) and corpus.skipped == []  # the empty answer is no flaw for images
    chinese = {f"slake::train::{record['qid']}" for record in records if record["q_lang"] == "zh"}
    assert corpus.outside_selection == chinese
    only_outside = {ex.meta["img_name"] for ex in corpus.examples} - {
        ex.meta["img_name"] for ex in corpus.examples if ex.example_id not in chinese}
    assert only_outside == {SLAKE_TEST_IMAGE_CHINESE_IN_TRAIN}


def test_each_split_is_compared_with_its_own_expected_count(slake_release, tmp_path):
    from medexp.inspect import summarize

    counts = {}
    for split in ("test", "validate", "train"):
        cfg = compose(["bench=slake", f"bench.root={slake_release}", f"bench.split={split}"]).bench
        counts[split] = expected_count(cfg)
        summary = summarize(load_benchmark_from_config(cfg, tmp_path / "cache"), cfg, tmp_path / "cache")
        assert summary["expected_examples"] == counts[split]
        assert f"the config expects {counts[split]} for split {split}" in summary["findings"][0]
    assert counts == {"test": 1061, "validate": 1053, "train": 4919}
    assert summary["n_skipped.empty_answer"] == 1 and summary["files"] == [str(slake_release / "train.json")]
    assert summary["skipped_rows"][0]["row"] == f"slake::train::{SLAKE_EMPTY_ANSWER_QID}"
    with pytest.raises(Exception, match="expected_examples .* or .*expected_by_split .*not both"):
        load_benchmark("slake", cache_dir=tmp_path / "cache", root=slake_release, expected_examples=5)


# ---------------------------------------------------------------------------------- PathVQA
def test_pathvqa_authors_layout_is_detected_and_deduplicated(tmp_path):
    root = write_pathvqa(tmp_path / "PathVQA")
    bench = load_benchmark("pathvqa", cache_dir=tmp_path / "cache", root=root)
    assert bench.layout == "pathvqa_release" and bench.files == [str(root / "pvqa_test.json")]
    assert [ex.example_id for ex in bench.examples] == [f"pathvqa::test::{n}" for n in range(6)]
    assert [(ex.meta["img_id"], ex.question, ex.answer) for ex in bench.examples] == [
        ("test_0000", "what is present?", "necrosis"), ("test_0000", "is this a liver?", "yes"),
        ("test_0002", "what are the cells?", "neutrophils"), ("test_0002", "what are the cells?", "lymphocytes"),
        ("test_0001", "where is this?", "kidney"), ("test_0001", "is there fibrosis?", "no")]
    assert [ex.meta["release_row"] for ex in bench.examples] == [0, 1, 2, 4, 5, 6]
    assert bench.examples[2].image == root / "images" / "test" / "test_0002.jpg"
    (removed,) = bench.removed_duplicates
    assert removed.where.endswith("(test_0002) question 1") and "same image, question and answer as" in removed.reason
    kept_all = load_benchmark("pathvqa", cache_dir=tmp_path / "cache", root=root, dedup=False)
    assert len(kept_all) == 7 and kept_all.removed_duplicates == []


def test_pathvqa_validation_is_the_val_file_and_bad_records_are_counted(tmp_path):
    records = pathvqa_records()
    records.insert(1, {"sentf": {"pvqa": ["orphan?"]}})  # no img_id
    records[0]["labelf"]["pvqa"][1] = {}  # a question without an answer
    root = write_pathvqa(tmp_path / "PathVQA", records, split="val")
    for split in ("val", "validation"):
        bench = load_benchmark("pathvqa", cache_dir=tmp_path / "cache", root=root, split=split,
                               max_skipped_share=0.5)
        assert bench.files == [str(root / "pvqa_val.json")] and len(bench) == 5
        assert Counter(skip.kind for skip in bench.skipped) == {"missing field": 1, "missing answer": 1}
    with pytest.raises(ValueError, match=r"PathVQA has splits .* not 'dev'"):
        load_benchmark("pathvqa", cache_dir=tmp_path / "cache", root=root, split="dev")


def test_pathvqa_hub_copy_is_read_when_the_root_holds_parquet(tmp_path):
    root = tmp_path / "path-vqa"
    write_hf_parquet(root / "data" / "validation-00000-of-00001.parquet",
                     {"image": image_cells([1, 2]), "question": ["q1?", "q2?"], "answer": ["yes", "no"]})
    bench = load_benchmark("pathvqa", cache_dir=tmp_path / "cache", root=root, split="val")
    assert bench.layout == "hf_parquet" and [ex.example_id for ex in bench.examples] == [
        "pathvqa::validation::0", "pathvqa::validation::1"]
    with pytest.raises(FileNotFoundError, match="holds neither the authors' PathVQA files"):
        load_benchmark("pathvqa", cache_dir=tmp_path / "cache", root=root, split="test")


def test_a_stale_nested_copy_of_a_split_is_an_error_naming_both(tmp_path):
    root = tmp_path / "path-vqa"
    columns = {"image": image_cells([1, 2]), "question": ["q1?", "q2?"], "answer": ["yes", "no"]}
    write_hf_parquet(root / "data" / "test-00000-of-00001.parquet", columns)
    write_hf_parquet(root / "old_download" / "data" / "test-00000-of-00001.parquet", columns)
    with pytest.raises(ValueError) as info:
        load_benchmark("pathvqa", cache_dir=tmp_path / "cache", root=root, format="hf_parquet", dedup=None)
    message = str(info.value)
    assert "split 'test' has parquet files in 2 folders" in message
    assert "data/ (1 file(s): data/test-00000-of-00001.parquet)" in message
    assert "old_download/data/ (1 file(s): old_download/data/test-00000-of-00001.parquet)" in message


# ----------------------------------------------------------------------- mm-perturb's twins
def test_the_published_perturbed_mmstar_tsv_loads_with_its_bad_rows_counted(tmp_path):
    root = write_mmstar_perturbed(tmp_path / "LMUData")
    bench = load_benchmark("mmstar_tsv", cache_dir=tmp_path / "cache", root=root, tsv_file="MMStar_pert_local.tsv",
                           twin=None)
    assert len(bench) == MMSTAR_ITEMS - 2
    assert [(skip.example_id, skip.kind) for skip in bench.skipped] == [
        (f"mmstar_tsv::test::{MMSTAR_OPTION_GAP}", "option gap"),
        (f"mmstar_tsv::test::{MMSTAR_ANSWER_OUTSIDE}", "answer letter outside options")]
    assert f"MMStar_pert_local.tsv: row {MMSTAR_OPTION_GAP + 1}: option B follows the empty option A" in bench.skipped[0].reason
    assert skip_metrics(bench.skipped) == {"n_skipped.option_gap": 1.0, "n_skipped.answer_letter_outside_options": 1.0}
    # the authors' absolute paths resolve under the root through the config's image_root_from/to
    first = bench.examples[0]
    assert first.image == root / "images" / "MMStar_semantic_flux" / "0.jpg"
    assert (first.answer, first.options[:2], first.meta["answer_letter"]) == ("option b0", ("option a0", "option b0"), "B")
    assert bench.examples[2].image.parts[-2] == "MMStar"
    # a detector scoring free text keeps the gap row (its answer B names a filled option)
    cfg = compose(["bench=mmstar_tsv", f"bench.root={root}", "bench.tsv_file=MMStar_pert_local.tsv"]).bench
    open_task = load_benchmark_from_config(cfg, tmp_path / "cache", OPEN_TASK)
    gap = next(ex for ex in open_task.examples if ex.example_id.endswith(f"::{MMSTAR_OPTION_GAP}"))
    assert (gap.options, gap.answer) == (None, f"option b{MMSTAR_OPTION_GAP}")
    assert [skip.kind for skip in open_task.skipped] == ["answer letter outside options"]


def test_the_twin_config_names_the_published_file(tmp_path):
    from medexp.benchmarks.twins import load_twin

    root = write_mmstar_perturbed(tmp_path / "LMUData", mmstar_pert_rows(300))
    cfg = compose(["bench=mmstar_tsv", f"bench.root={root}", "bench.max_skipped_share=0.01"]).bench
    assert cfg.twin.tsv_file == "MMStar_pert_local.tsv"
    twin = load_twin(cfg, tmp_path / "cache")
    assert twin.name == "mmstar_tsv_twin" and len(twin) == 299 and [s.kind for s in twin.skipped] == ["option gap"]
