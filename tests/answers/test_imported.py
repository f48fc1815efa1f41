"""Imported responses: matched to the cell's probes by id, judged by the same parser, errors kept."""

from __future__ import annotations

import dataclasses
import json

import pytest

from medexp.answers import RELEASE_ID_KEY, import_model_responses, import_responses, responses_digest
from medexp.kernel.hashing import file_sha256
from medexp.config import compose
from medexp.config.schemas import AnswerMode
from tests.answers.conftest import choice_probe, text_probe
from tests.answers.judging import judged, judged_import, judged_model_import


def write_jsonl(path, records, blank_lines=False):
    lines = [json.dumps(record) if not isinstance(record, str) else record for record in records]
    path.write_text(("\n\n" if blank_lines else "\n").join(lines) + "\n")
    return path


def probes(n=4):
    return [choice_probe(example_id=f"case{index}", gold="ABCD"[index % 4]) for index in range(n)]


def test_raw_replies_are_judged_and_missing_probes_become_error_rows(tmp_path, answer_cfg):
    path = write_jsonl(tmp_path / "answers.jsonl", [
        {"probe_id": "case2::original", "response": "The answer is C."},
        {"probe_id": "case0::original", "response": "Pneumonia"},
        {"probe_id": "case1::original", "response": "A or B"},
    ], blank_lines=True)
    table = judged_import(path, probes(), answer_cfg)
    assert list(table["probe_id"]) == [f"case{index}::original" for index in range(4)]  # probe order
    assert list(table["status"]) == ["ok", "no_answer", "ok", "error"]
    assert list(table["choice"]) == ["A", None, "C", None]
    assert list(table["correct"]) == [True, False, True, False]
    assert table.iloc[3]["error"] == f"no response imported for this probe (from {path})"


def test_a_medvigil_harness_file_imports(tmp_path, answer_cfg, caplog):
    # As the MedVIGIL baseline runner writes it: model_answer (raw), model_letter (its permissive
    # parse, "" when none), status "ok" or "error: <message>", correct_letter, and bookkeeping.
    common = {"format": "mcq", "model_id": "gpt-4o", "latency_ms": 812, "usage": {"total_tokens": 301},
              "timestamp": "2026-05-01T10:00:00Z"}
    records = [
        {"probe_id": "MVB-0001__orig", "case_id": "MVB-0001", "probe_kind": "original", "model_answer": "A",
         "model_letter": "A", "correct_letter": "A", "status": "ok", **common},
        {"probe_id": "MVB-0002__orig", "case_id": "MVB-0002", "probe_kind": "original",
         "model_answer": "A mass is seen; B is unlikely", "model_letter": "A", "correct_letter": "B", "status": "ok",
         **common},
        {"probe_id": "MVB-0003__orig", "case_id": "MVB-0003", "probe_kind": "original", "model_answer": "",
         "status": "error: Error code: 429 - rate limit exceeded", **common},
        {"probe_id": "MVB-0004__orig", "case_id": "MVB-0004", "probe_kind": "original", "model_answer": "",
         "model_letter": "", "correct_letter": "D", "status": "ok", **common},
    ]
    path = write_jsonl(tmp_path / "gpt-4o__mcq.jsonl", records)
    cell_probes = [dataclasses.replace(probe, meta={RELEASE_ID_KEY: f"MVB-000{index + 1}__orig"})
                   for index, probe in enumerate(probes())]
    table = judged_import(path, cell_probes, answer_cfg)
    assert list(table["status"]) == ["ok", "no_answer", "error", "no_answer"]
    assert list(table["correct"]) == [True, False, False, False]
    assert table.iloc[2]["error"] == f"{path}:3: Error code: 429 - rate limit exceeded"
    assert table.iloc[2]["error_cause"] == "rate_limited"
    assert table.iloc[1]["response"] == "A mass is seen; B is unlikely"  # raw text kept, its letter overruled
    assert "strict parser read the raw reply differently" in caplog.text


def test_letter_only_rows_are_used_when_there_is_no_raw_reply(tmp_path, answer_cfg):
    path = write_jsonl(tmp_path / "letters.jsonl", [
        {"probe_id": "case0::original", "choice": "a"},
        {"probe_id": "case1::original", "model_letter": "F"},  # not an option of a 4-option probe
        {"probe_id": "case2::original", "status": "timeout"},  # a harness status, no answer
        {"probe_id": "case3::original", "status": "error", "error": "HTTP 500 after 3 retries"},
    ])
    table = judged_import(path, probes(), answer_cfg)
    assert list(table["status"]) == ["ok", "no_answer", "error", "error"]
    assert list(table["choice"]) == ["A", None, None, None] and list(table["response"])[:2] == ["a", "F"]
    assert list(table["error"])[2:] == [f"{path}:3: the harness recorded status 'timeout'",
                                        f"{path}:4: HTTP 500 after 3 retries"]
    assert list(table["error_cause"]) == [None, None, "timeout", "http_5xx"]


def test_free_text_probes_import(tmp_path, answer_cfg):
    cell_probes = [text_probe(example_id="s1", gold="effusion"), text_probe(example_id="s2", gold="left lung")]
    path = write_jsonl(tmp_path / "slots.jsonl", [{"probe_id": "s1::slot_mask", "response": "Effusion."},
                                                   {"probe_id": "s2::slot_mask", "response": "left"}])
    table = judged_import(path, cell_probes, answer_cfg)
    assert list(table["choice"]) == ["effusion", "left"] and list(table["correct"]) == [True, False]


@pytest.mark.parametrize(("lines", "message"), [
    (['{"probe_id": "case0::original", "response": "A"}', '{"probe_id": "nope::original", "response": "A"}'],
     r"answers.jsonl:2: probe_id 'nope::original' is not in this cell's probe set \(4 probes"),
    (['{"probe_id": "case0::original", "response": "A"}', '{"probe_id": "case1::original", "response": "B"}',
      '{"probe_id": "case0::original", "response": "C"}'],
     r"answers.jsonl:3: probe 'case0::original' is answered twice \(first on line 1\)"),
    (['{"probe_id": "case1::original", "response": "B", "correct_letter": "C"}'],
     r"answers.jsonl:1: correct_letter 'C' but probe case1::original has gold 'B'"),
    (['{"probe_id": "case0::original", "response": "A"', '["case0::original", "A"]'],
     r"answers.jsonl: no usable line, 2 bad line\(s\).*answers.jsonl:1: not JSON"),
    (['{"probe_id": "case0::original", "output": "A"}'], r"answers.jsonl: no reply field: its lines have "
                                                          r"\['output', 'probe_id'\].*model.reply_fields"),
])
def test_files_that_are_not_this_cells_are_refused_with_file_and_line(tmp_path, answer_cfg, lines, message):
    path = write_jsonl(tmp_path / "answers.jsonl", lines)
    with pytest.raises(ValueError, match=message):
        import_responses(path, probes(), answer_cfg)


def test_bad_lines_are_skipped_counted_and_named(tmp_path, answer_cfg, caplog):
    path = tmp_path / "answers.jsonl"
    path.write_bytes(b'{"probe_id": "case0::original", "response": "A"}\n'
                     b'{"probe_id": "case1::original", "response": "B"\n'  # truncated
                     b'["case2::original", "C"]\n'
                     b'{"response": "D"}\n'
                     b'{"probe_id": "case2::original", "response": ["C"]}\n'  # wrong type: its probe is named
                     b'{"probe_id": "case3::original", "response": "\xe9D"}\n')  # Latin-1, not UTF-8
    table = judged_import(path, probes(), answer_cfg)
    assert list(table["status"]) == ["ok", "error", "error", "error"]
    assert list(table["error_cause"]) == [None, "not_imported", "malformed", "not_imported"]
    assert table.iloc[2]["error"].startswith(f"{path}:5: wrong field type")
    assert "5 bad line(s) skipped (not JSON 1, not a JSON object 1, no probe_id 1, not UTF-8 1, wrong field type 1)" \
        in caplog.text or "5 bad line(s) skipped" in caplog.text
    assert f"{path}:2: not JSON" in caplog.text


def test_statuses_are_mapped_explicitly(tmp_path, answer_cfg):
    lines = [{"probe_id": f"case{index}::original", "response": "ABCD"[index % 4], "status": status}
             for index, status in enumerate(["failed", "Success", "content_filter", "bogus", "done", "flaky"])]
    path = write_jsonl(tmp_path / "answers.jsonl", lines)
    table = import_responses(path, probes(6), answer_cfg, status_map={"flaky": "http_5xx"})
    assert list(table["status"]) == ["error", "ok", "error", "error", "ok", "error"]
    assert list(table["error_cause"]) == ["other", None, "refused", "malformed", None, "http_5xx"]
    assert table.iloc[0]["response"] == "A"  # a failed line's reply is kept, and is no reply
    # judged, the recorded refusal is a no-answer (counted, not correct) and the failures stay errors
    assert list(judged(table, probes(6))["verdict"]) == ["error", "correct", "no_answer", "error", "correct", "error"]
    assert table.iloc[2]["response"] == "C"  # a refusal keeps its text
    assert "unknown status" in table.iloc[3]["error"] and f"{path}:4" in table.iloc[3]["error"]


@pytest.mark.parametrize(("field", "extra"), [("response", {}), ("model_answer", {"model_letter": "D"}),
                                              ("prediction", {"answer": "D"}), ("answer", {})])
def test_the_reply_field_of_each_harness(tmp_path, answer_cfg, field, extra):
    path = write_jsonl(tmp_path / "answers.jsonl", [{"probe_id": f"case{index}::original", field: "ABCD"[index],
                                                     **extra} for index in range(4)])
    table = judged_import(path, probes(), answer_cfg)
    assert list(table["choice"]) == list("ABCD") and table["correct"].all()


def test_the_reply_field_is_chosen_once_per_file(tmp_path, answer_cfg):
    # VLMEvalKit's `answer` is the gold: a line without `prediction` is bad, never read from `answer`
    path = write_jsonl(tmp_path / "answers.jsonl", [{"probe_id": "case0::original", "prediction": "A", "answer": "A"},
                                                    {"probe_id": "case1::original", "answer": "B"}])
    table = judged_import(path, probes(2), answer_cfg)
    assert list(table["status"]) == ["ok", "error"] and table.iloc[1]["error_cause"] == "malformed"
    assert "no reply field" in table.iloc[1]["error"]


def test_a_byte_order_mark_is_read_as_every_reader_reads_it(tmp_path, answer_cfg):
    path = tmp_path / "answers.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"probe_id": "case0::original", "response": "A"}).encode() + b"\n")
    assert list(judged_import(path, probes(1), answer_cfg)["correct"]) == [True]
    from medexp.answers.imported import imported_probe_ids

    assert imported_probe_ids(path) == {"case0::original"}


def test_lines_for_skipped_probes_are_set_aside_and_unknown_ones_refused(tmp_path, answer_cfg, caplog):
    # The harness answered a credentialed case this copy cannot load: its line is set aside.
    path = write_jsonl(tmp_path / "answers.jsonl", [
        {"probe_id": "case0::original", "response": "A"},
        {"probe_id": "MVB-0003__orig", "model_answer": "A", "status": "ok"},
    ])
    table = judged_import(path, probes(1), answer_cfg, skipped_ids=["MVB-0003__orig"])
    assert list(table["probe_id"]) == ["case0::original"] and list(table["correct"]) == [True]
    assert "1 line(s) answer probes this cell skipped" in caplog.text
    with pytest.raises(ValueError, match=r"answers.jsonl:2: probe_id 'MVB-0003__orig' is not in this cell's probe set"):
        import_responses(path, probes(1), answer_cfg, skipped_ids=["MVB-0009__orig"])


def test_missing_file_mode_and_ambiguous_ids(tmp_path, answer_cfg):
    with pytest.raises(FileNotFoundError, match="no imported responses file at"):
        import_responses(tmp_path / "absent.jsonl", probes(), answer_cfg)
    path = write_jsonl(tmp_path / "a.jsonl", [{"probe_id": "case0::original", "response": "A"}])
    with pytest.raises(ValueError, match="imported responses are generated answers"):
        import_responses(path, probes(), dataclasses.replace(answer_cfg, mode=AnswerMode.likelihood))
    clash = [probes()[0], dataclasses.replace(probes()[1], meta={RELEASE_ID_KEY: "case0::original"})]
    with pytest.raises(ValueError, match="two probes answer to the id 'case0::original'"):
        import_responses(path, clash, answer_cfg)


def test_digest_is_the_file_content_hash(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [{"probe_id": "case0::original", "response": "A"}])
    first = responses_digest(path)
    assert first == file_sha256(path)
    write_jsonl(path, [{"probe_id": "case0::original", "response": "B"}])
    assert responses_digest(path) != first


def test_a_responses_model_config_imports_its_file(tmp_path, answer_cfg):
    path = write_jsonl(tmp_path / "gpt.jsonl", [{"probe_id": "case0::original", "response": "A"}])
    model = compose(["model=responses", "model.name=gpt-4o", f"model.responses_path={path}"]).model
    table = judged_model_import(probes(1), model, answer_cfg)
    assert list(table["correct"]) == [True]
    model.responses_path = None
    with pytest.raises(ValueError, match="model=gpt-4o: set model.responses_path"):
        import_model_responses(probes(1), model, answer_cfg)
    with pytest.raises(ValueError, match="imported responses need family responses"):
        import_model_responses(probes(1), compose(["model=openai_compatible"]).model, answer_cfg)
