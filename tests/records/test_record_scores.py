"""Scores from elsewhere (model source scores): read, joined to the benchmark, counted, refused."""

from __future__ import annotations

import hashlib
import json
import math

import pandas as pd
import pytest
from omegaconf import OmegaConf

from medexp.benchmarks import load_benchmark_from_config
from medexp.config import compose
from medexp.scoring.records import record_scores
from tests.records.conftest import audit_document, slake_rows


def _bench(root, tmp_path):
    cfg = compose(["bench=slake", f"bench.root={root}"])
    return cfg.bench, load_benchmark_from_config(cfg.bench, tmp_path / "cache", ("question", "answer"), pixels=False)


def _scores(path, **overrides):
    base = compose(["model=scores", f"model.scores.path={path}"]).model.scores
    return OmegaConf.merge(base, overrides)


def test_the_audit_json_gives_one_models_scores_and_its_flags(slake_root, audit_file, tmp_path):
    bench_cfg, bench = _bench(slake_root, tmp_path)
    record = record_scores(_scores(audit_file, model="Model-B"), "b", bench.examples, bench_cfg)
    document = audit_document()
    expected = {r["example_id"].replace("slake_en", "slake"): r["mean_logprob"]["Model-B"] for r in document["records"]}
    table = record.table
    assert list(table["example_id"]) == [ex.example_id for ex in bench.examples]  # released order
    assert dict(zip(table["example_id"], table["mean_logprob"])) == expected
    assert table["sum_logprob"].isna().all() and table["n_answer_tokens"].isna().all()  # not in the file
    assert list(table["flagged"]) == [ex.meta["img_name"] == "xmlab0/source.jpg" for ex in bench.examples]
    assert record.metrics() == {"scores_n_rows": 12.0, "scores_n_matched": 12.0, "scores_n_missing": 0.0}


def test_an_unknown_model_name_is_refused_naming_the_files_models(slake_root, audit_file, tmp_path):
    bench_cfg, bench = _bench(slake_root, tmp_path)
    with pytest.raises(ValueError, match=r"model.scores.model='GPT' is not one of .*\['Model-A', 'Model-B'\]"):
        record_scores(_scores(audit_file, model="GPT"), "x", bench.examples, bench_cfg)


def _jsonl_with_flaws(path, n_good: int) -> None:
    """Lines 1..n_good good, then one of each flaw (ids of the last examples)."""
    ids = [f"slake_en::test::{100 + i}" for i in range(12)]
    lines = [json.dumps({"example_id": ids[i], "mean_logprob": -1.0 - i}) for i in range(n_good)]
    lines += [
        "{not json",                                                         # bad_line
        json.dumps({"mean_logprob": -1.0}),                                  # no_id
        json.dumps({"example_id": "slake_en::test::99999", "mean_logprob": -1.0}),  # unmatched
        json.dumps({"example_id": "vqa_rad::test::1", "mean_logprob": -1.0}),       # unmatched (other bench)
        json.dumps({"example_id": ids[n_good], "mean_logprob": float("nan")}).replace("NaN", "NaN"),  # nonfinite
        json.dumps({"example_id": ids[n_good + 1], "mean_logprob": "high"}),         # nonfinite
        json.dumps({"example_id": ids[n_good + 2], "mean_logprob": -2.0}),           # duplicated ...
        json.dumps({"example_id": ids[n_good + 2], "mean_logprob": -3.0}),           # ... twice
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_bad_rows_are_skipped_and_counted_with_file_and_line(slake_root, tmp_path):
    bench_cfg, bench = _bench(slake_root, tmp_path)
    path = tmp_path / "scores.jsonl"
    _jsonl_with_flaws(path, 9)
    record = record_scores(_scores(path, min_coverage=0.5), "m", bench.examples, bench_cfg)
    assert record.n_matched == 9
    counts = record.metrics()
    assert counts["scores_n_rows"] == 17.0 and counts["scores_n_missing"] == 3.0
    assert {k: v for k, v in counts.items() if "skipped" in k} == {
        "scores_n_skipped.bad_line": 1.0, "scores_n_skipped.no_id": 1.0, "scores_n_skipped.unmatched": 2.0,
        "scores_n_skipped.nonfinite": 2.0, "scores_n_skipped.duplicated": 2.0}
    assert record.skipped["bad_line"][0].startswith(f"{path}:10: ")
    assert record.skipped["unmatched"][0].startswith(f"{path}:12: ")
    assert f"{path}:16" in record.skipped["duplicated"][0] and f"{path}:17" in record.skipped["duplicated"][0]
    assert list(record.table["mean_logprob"]) == [-1.0 - i for i in range(9)]


def test_too_little_coverage_is_refused_naming_the_counts(slake_root, tmp_path):
    bench_cfg, bench = _bench(slake_root, tmp_path)
    path = tmp_path / "scores.jsonl"
    _jsonl_with_flaws(path, 9)
    with pytest.raises(ValueError) as refused:
        record_scores(_scores(path), "m", bench.examples, bench_cfg)  # default min_coverage 0.95
    message = str(refused.value)
    assert "scores 9 of the 12 examples" in message and "75.0% < model.scores.min_coverage=0.95" in message
    assert "'unmatched': 2" in message and "'duplicated': 2" in message and f"{path}:10" in message


def test_a_csv_of_upstream_ids_joins_by_a_declared_column(slake_root, tmp_path):
    bench_cfg, bench = _bench(slake_root, tmp_path)
    path = tmp_path / "scores.csv"
    pd.DataFrame({"qid": [100 + i for i in range(12)], "loglik": [-float(i) for i in range(12)]}).to_csv(path, index=False)
    record = record_scores(_scores(path, id_field="qid", join="source_id", score_field="loglik",
                                   score_kind="sum_logprob"), "m", bench.examples, bench_cfg)
    assert list(record.table["sum_logprob"]) == [-float(i) for i in range(12)]
    assert record.table["mean_logprob"].isna().all()


def _lmms_eval_line(doc_id: int, row: dict, loglik: float) -> str:
    """One line of lmms-eval's samples_<task>.jsonl for a loglikelihood task (evaluator.py's keys)."""
    doc = {k: row[k] for k in ("qid", "img_name", "question", "answer", "answer_type")}
    return json.dumps({"doc_id": doc_id, "doc": doc, "target": row["answer"],
                       "arguments": [[f"{row['question']}\n", f" {row['answer']}"]],
                       "resps": [[[loglik, False]]], "filtered_resps": [[loglik, False]],
                       "doc_hash": "0" * 64, "prompt_hash": "1" * 64, "target_hash": "2" * 64, "perplexity": loglik},
                      ensure_ascii=False)


def test_lmms_eval_samples_of_a_loglikelihood_task_join_by_doc_id_or_by_a_doc_field(slake_root, tmp_path):
    bench_cfg, bench = _bench(slake_root, tmp_path)
    english = [row for row in slake_rows() if row["q_lang"] == "en"]
    path = tmp_path / "samples_slake_ll.jsonl"
    path.write_text("\n".join(_lmms_eval_line(i, row, -0.25 * i) for i, row in enumerate(english)) + "\n",
                    encoding="utf-8")
    by_position = record_scores(_scores(path, id_field="doc_id", join="position", score_kind="sum_logprob"),
                                "m", bench.examples, bench_cfg)
    by_qid = record_scores(_scores(path, id_field="doc.qid", join="source_id", score_kind="sum_logprob"),
                           "m", bench.examples, bench_cfg)
    for record in (by_position, by_qid):
        assert list(record.table["sum_logprob"]) == [-0.25 * i for i in range(12)]
    assert list(by_qid.table["doc.answer_type"]) == [row["answer_type"] for row in english]
    with pytest.raises(ValueError, match="summed over the answer's tokens: set model.scores.score_kind=sum_logprob"):
        record_scores(_scores(path, id_field="doc_id", join="position"), "m", bench.examples, bench_cfg)


def test_a_multiple_choice_sample_is_no_gold_score(slake_root, tmp_path):
    bench_cfg, bench = _bench(slake_root, tmp_path)
    english = [row for row in slake_rows() if row["q_lang"] == "en"]
    lines = [_lmms_eval_line(i, row, -1.0) for i, row in enumerate(english)]
    choice = json.loads(lines[0])
    choice["filtered_resps"] = [[-1.0, False], [-2.0, True]]  # one request per option
    lines[0] = json.dumps(choice)
    path = tmp_path / "samples_mc.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    record = record_scores(_scores(path, id_field="doc_id", join="position", score_kind="sum_logprob",
                                   min_coverage=0.9), "m", bench.examples, bench_cfg)
    assert record.metrics()["scores_n_skipped.nonfinite"] == 1.0 and record.n_matched == 11


def test_the_files_sha256_stands_in_for_the_weights(audit_file):
    from medexp.models import weights_fingerprint

    model = compose(["model=scores", f"model.scores.path={audit_file}", "model.scores.model=Model-A"]).model
    assert weights_fingerprint(model, audit_file.parent) == hashlib.sha256(audit_file.read_bytes()).hexdigest()


def test_a_record_has_no_weights_to_load(audit_file):
    from medexp.models import model_location

    model = compose(["model=scores", f"model.scores.path={audit_file}"]).model
    with pytest.raises(ValueError, match="is a record of per-example scores .* no weights to load"):
        model_location(model, audit_file.parent)


def test_source_scores_without_its_section_is_refused():
    from medexp.config.ranges import ConfigRangeError, validate

    cfg = compose(["model=qwen2_5_vl", "model.source=scores"])
    with pytest.raises(ConfigRangeError, match="source=scores needs a `scores:` section"):
        validate(cfg)


def test_every_real_model_on_record_covers_slake_en(tmp_path):
    """The repository's copy of the audit's file covers the 1,061 SLAKE-En questions for all five models."""
    cfg = compose(["bench=slake", "bench.root=${paths.root}/medexp/data/realdata/slake"])
    bench = load_benchmark_from_config(cfg.bench, tmp_path, ("question", "answer"), pixels=False)
    assert len(bench.examples) == 1061
    for name in ("chexagent_record", "llava_onevision_record", "internvl3_record", "qwen2_5_vl_record", "blip2_record"):
        model = compose([f"model={name}"]).model
        record = record_scores(model.scores, name, bench.examples, cfg.bench)
        assert record.n_matched == 1061 and not record.skipped
        assert all(math.isfinite(value) for value in record.table["mean_logprob"])


def test_a_table_joined_by_question_text_counts_a_shared_text_as_ambiguous(tmp_path):
    rows = slake_rows()
    english = [row for row in rows if row["q_lang"] == "en"]
    english[1]["question"] = english[0]["question"]  # SLAKE asks the same question of many images
    root = tmp_path / "slake"
    root.mkdir()
    (root / "test.json").write_text(json.dumps(rows), encoding="utf-8")
    bench_cfg, bench = _bench(root, tmp_path)
    path = tmp_path / "scores.jsonl"
    path.write_text("\n".join(json.dumps({"question": f"  {row['question']} ", "mean_logprob": -1.0 * i})
                              for i, row in enumerate(english)) + "\n", encoding="utf-8")
    record = record_scores(_scores(path, id_field="question", join="question", min_coverage=0.8), "m",
                           bench.examples, bench_cfg)
    assert record.n_matched == 10 and record.metrics()["scores_n_skipped.ambiguous"] == 2.0
    assert "names several examples" in record.skipped["ambiguous"][0]
    assert list(record.table["mean_logprob"]) == [-1.0 * i for i in range(2, 12)]
