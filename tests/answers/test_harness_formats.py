"""Harness formats (medexp.answers.formats): the table, each reader on files as the real tool
writes them (OpenAI's Batch output, lmms-eval 0.7's samples without their doc), the files each
writer makes (VLMEvalKit's shared-image rows, a text dataset apart), and the refusals that keep a
reply file from answering another probe set than the cell's."""

from __future__ import annotations

import base64
import json
import logging

import pandas as pd
import pytest

from medexp.answers import import_responses
from medexp.answers.coverage import require_answered
from medexp.answers.formats import ALIASES, FORMATS, harness_format
from medexp.answers.formats.manifest import ProbeSetMismatch, read_manifest
from medexp.config.schemas.model import ResponsesFormat
from medexp.export import main as export_main
from tests.answers.conftest import OPTIONS, choice_probe, text_probe, write_png
from tests.answers.exports import imported, jsonl_replies, manifest_of
from tests.answers.judging import judged, judged_import


def test_every_responses_format_reaches_a_format_that_names_itself():
    for fmt in ResponsesFormat:
        assert harness_format(fmt.value).name == ALIASES.get(fmt.value, fmt.value)
    for name in FORMATS:
        loaded = harness_format(name)
        assert loaded.name == name and callable(loaded.write) and callable(loaded.read)
    with pytest.raises(ValueError, match="no harness format 'excel'; formats: \\['inspect_ai', 'jsonl', 'llava_med'"):
        harness_format("excel")


# ------------------------------------------------------------------------------ OpenAI Batch output
def batch_line(custom_id: str, content=None, *, status: int = 200, error=None, body=None, number: int = 0) -> str:
    """One line of the Batch API's output file (OpenAI's; vLLM's run_batch writes the same keys)."""
    if error is not None:
        return json.dumps({"id": f"batch_req_{number}", "custom_id": custom_id, "response": None, "error": error})
    if body is None:
        body = {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": 1732780000, "model": "gpt-4o-2024-08-06",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": None},
                             "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 90, "completion_tokens": 1, "total_tokens": 91}}
    return json.dumps({"id": f"batch_req_{number}", "custom_id": custom_id,
                       "response": {"status_code": status, "request_id": f"req_{number}", "body": body}, "error": None})


def batch_probes(count: int = 8):
    return [choice_probe(example_id=f"ex{i}", gold="B") for i in range(count)]


def test_the_batch_output_reader_reads_replies_and_every_kind_of_failure(tmp_path, answer_cfg, caplog):
    ids = [probe.probe_id for probe in batch_probes()]
    refusal = {"id": "c", "object": "chat.completion", "model": "gpt-4o", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."},
         "finish_reason": "stop"}]}
    lines = [
        batch_line(ids[0], "B"),
        batch_line(ids[1], [{"type": "text", "text": "The answer is "}, {"type": "text", "text": "(A)."}]),
        batch_line(ids[2], error={"code": "batch_expired", "message": "This request could not be executed before the "
                                                                       "completion window expired."}),
        batch_line(ids[3], status=429, body={"error": {"message": "Rate limit reached", "type": "requests",
                                                       "code": "rate_limit_exceeded"}}),
        batch_line(ids[4], status=500, body={"error": {"message": "The server had an error", "type": "server_error"}}),
        batch_line(ids[5], body=refusal),
        batch_line(ids[6], body={"object": "chat.completion", "choices": []}),
        json.dumps({"id": "batch_req_7", "response": None, "error": None}),  # no custom_id: a bad line
    ]
    path = tmp_path / "batch_output.jsonl"
    path.write_text("\n".join(reversed(lines)) + "\n")  # a batch's output comes back in any order
    with caplog.at_level(logging.WARNING, logger="medexp"):
        table = import_responses(path, batch_probes(), answer_cfg, fmt="openai_batch")
    assert "1 bad line(s) skipped (no custom_id 1)" in caplog.text
    assert list(table["status"]) == ["ok", "ok", "error", "error", "error", "error", "error", "error"]
    meant = judged(table, batch_probes())
    assert list(meant["choice"][:2]) == ["B", "A"] and list(meant["correct"][:2]) == [True, False]
    assert list(table["error_cause"][2:]) == ["other", "rate_limited", "http_5xx", "refused", "malformed",
                                              "not_imported"]
    assert "batch_expired" in table.iloc[2]["error"] and "HTTP 429: rate_limit_exceeded" in table.iloc[3]["error"]
    assert table.iloc[5]["response"] == "I can't help with that."  # a refusal keeps its text


# --------------------------------------------------------------------------- lmms-eval 0.7 samples
def lmms_eval_07_sample(doc_id: int, target: str, reply: str, prompt: str) -> str:
    """A sample as lmms-eval 0.7.3's EvaluationTracker.save_results_samples writes it for a
    generate_until task: no doc, the reply flattened into filtered_resps, resps dropped when equal."""
    return json.dumps({"doc_id": doc_id, "target": target, "filtered_resps": reply, "token_counts": [None],
                       "doc_hash": "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b",
                       "exact_match": float(reply == target), "input": prompt})


def test_lmms_eval_07_samples_of_an_exported_task_join_by_doc_id_checked_by_target(tmp_path, answer_cfg):
    probes = batch_probes(3)
    folder = tmp_path / "lmms_out" / "my_model"
    folder.mkdir(parents=True)
    path = folder / "20261128_101500_samples_medexp_demo_option_order_0123abcd.jsonl"
    path.write_text("".join(lmms_eval_07_sample(i, "B", reply, "prompt") + "\n" for i, reply in enumerate("BAB")))
    with pytest.raises(ValueError, match="the samples name task medexp_demo_option_order_0123abcd, an export's, and no "
                                         "manifest of this format was found"):
        import_responses(path, probes, answer_cfg, fmt="lmms_eval")
    manifest = manifest_of(tmp_path, "lmms_eval", "0123abcd" + "0" * 24, 3)
    table = judged_import(tmp_path / "lmms_out", probes, answer_cfg, fmt="lmms_eval", probe_set="0123abcd" + "0" * 24,
                          manifest=manifest)
    assert list(table["choice"]) == ["B", "A", "B"] and list(table["correct"]) == [True, False, True]
    # the task's name carries another probe set's hash
    with pytest.raises(ProbeSetMismatch, match="answers probe set 0123abcd, and this cell's probe set is ffff"):
        import_responses(path, probes, answer_cfg, fmt="lmms_eval", probe_set="f" * 32, manifest=manifest)
    # a doc out of place: its target is not its probe's gold
    probes[1] = choice_probe(example_id="ex1", gold="C")
    with pytest.raises(ValueError, match="doc_id 1 has target 'B', and this cell's probe 1 .* has gold 'C'"):
        import_responses(path, probes, answer_cfg, fmt="lmms_eval", manifest=manifest)


def test_lmms_eval_07_samples_of_its_own_task_join_by_the_prompt_its_instruction_set_aside(tmp_path, answer_cfg):
    probes = [text_probe(example_id=f"slake::test::{i}", kind="original", gold=gold, question=question)
              for i, (question, gold) in enumerate([("Which organ is abnormal?", "Lung"), ("Where is the liver?", "Left")])]
    path = tmp_path / "20261128_101500_samples_slake_en.jsonl"
    path.write_text("".join(lmms_eval_07_sample(9 - i, probe.gold, reply,
                                                f"{probe.question}\nAnswer the question using a single word or phrase.")
                            + "\n" for i, (probe, reply) in enumerate(zip(probes, ["Lung", "right"]))))
    table = judged_import(path, probes, answer_cfg, fmt="lmms_eval")
    assert list(table["correct"]) == [True, False] and list(table["status"]) == ["ok", "ok"]


# ------------------------------------------------------------------------------- the files written
def test_vlmevalkit_datasets_share_each_image_by_index_and_keep_text_rows_apart(demo_export):
    both = demo_export("vlmevalkit", "text_only")  # original (image) and text_only (no image) probes
    manifest = read_manifest(both / "manifest-vlmevalkit.json")
    name = f"medexp_demo_text_only_{manifest.probe_set[:8]}"
    images = pd.read_csv(both / f"{name}.tsv", sep="\t", dtype=str)
    text = pd.read_csv(both / f"{name}_TEXT.tsv", sep="\t", dtype=str)
    assert len(images) + len(text) == manifest.n_probes and "image" not in text
    assert set(images["category"]) == {"original"} and set(text["category"]) == {"text_only"}
    option_order = demo_export("vlmevalkit")
    rows = pd.read_csv(next(option_order.glob("*.tsv")), sep="\t", dtype=str)
    by_index = dict(zip(rows["index"], rows["image"]))
    shared = [image for image in rows["image"] if len(image) <= 64]  # a later row of the same image
    assert len(shared) == len(rows) // 2 and all(len(by_index[index]) > 64 for index in shared)
    decoded = base64.b64decode(by_index[shared[0]])
    assert decoded.startswith(b"\x89PNG")  # the image file's own bytes


def test_llava_med_refuses_probes_asked_without_an_image(demo_cache, tmp_path, capsys):
    status = export_main([f"paths.cache_dir={demo_cache}", "bench.max_examples=4", "detector=text_only",
                          "format=llava_med", f"out={tmp_path / 'out'}"])
    assert status == 1
    assert "LLaVA-Med's model_vqa.py opens an image for every question, and 4 probe(s)" in capsys.readouterr().err


def test_export_names_a_detector_that_asks_nothing_and_a_likelihood_cell(demo_cache, tmp_path, capsys):
    assert export_main([f"paths.cache_dir={demo_cache}", "detector=exch_rank", "format=jsonl", f"out={tmp_path}"]) == 1
    assert "detector=exch_rank asks no questions" in capsys.readouterr().err
    assert export_main([f"paths.cache_dir={demo_cache}", "detector=option_order", "detector.answer.mode=likelihood",
                        "format=jsonl", f"out={tmp_path}"]) == 1
    assert "a harness generates its replies" in capsys.readouterr().err
    assert export_main(["detector=option_order", "format=excel", f"out={tmp_path}"]) == 2
    assert "no harness format 'excel'" in capsys.readouterr().err


# ------------------------------------------------------------------------ replies to the wrong probes
def test_replies_to_another_probe_set_are_refused_naming_both_hashes(demo_export, demo_cache):
    export = demo_export("jsonl")
    replies = jsonl_replies(export)
    assert list(imported(demo_cache, replies, "jsonl")["correct"]) == [True] * 12
    exported = read_manifest(export / "manifest-jsonl.json").probe_set
    with pytest.raises(ProbeSetMismatch, match=f"answers probe set {exported}, and this cell's probe set is [0-9a-f]{{32}}"):
        imported(demo_cache, replies, "jsonl", "seed=1")  # the same probe ids, other shuffles


def test_replies_to_requests_worded_otherwise_are_refused_naming_the_setting(demo_export, demo_cache):
    replies = jsonl_replies(demo_export("jsonl"))
    with pytest.raises(ValueError, match="detector.answer.option_line: export '{letter}. {text}', this cell '"):
        imported(demo_cache, replies, "jsonl", "detector.answer.option_line='({letter}) {text}'")


def test_a_batch_output_without_its_manifest_is_refused(demo_export, demo_cache, tmp_path):
    export = demo_export("openai_batch")
    requests = [json.loads(line) for line in (export / "requests.jsonl").read_text().splitlines()]
    elsewhere = tmp_path / "downloads" / "batch_output.jsonl"
    elsewhere.parent.mkdir()
    elsewhere.write_text("".join(batch_line(request["custom_id"], "A") + "\n" for request in requests))
    with pytest.raises(ValueError, match="names its probes by custom_id only.*set model.responses_manifest="):
        imported(demo_cache, elsewhere, "openai_batch")
    table = imported(demo_cache, elsewhere, "openai_batch", f"model.responses_manifest={export / 'manifest-openai_batch.json'}")
    assert list(table["status"]) == ["ok"] * len(requests)


def test_a_partial_reply_file_gives_counts_and_no_verdict(demo_export, demo_cache):
    export = demo_export("jsonl")
    replies = jsonl_replies(export, keep=lambda probe: probe["kind"] == "original")  # the shuffled arm never ran
    table = imported(demo_cache, replies, "jsonl")
    assert (table["error_cause"] == "not_imported").sum() == 6
    with pytest.raises(Exception, match=r"6 of 12 probes answered \(50.0%\), below answer.min_answered=0.95: no "
                                        r"verdict. No answer: not_imported 6"):
        require_answered(table, 0.95, "model=responses")


def test_a_foreign_reply_file_is_refused_with_the_line(demo_export, demo_cache):
    replies = jsonl_replies(demo_export("jsonl", "text_only"))  # another detector's export, read for option_order
    (replies.parent / "manifest-jsonl.json").unlink()
    with pytest.raises(ValueError, match="replies.jsonl:1: probe_id 'demo::test::00000::original' is not|"
                                         "replies.jsonl:2: probe_id 'demo::test::00000::text_only' is not in this cell's"):
        imported(demo_cache, replies, "jsonl")


def test_probes_written_by_the_jsonl_export_carry_what_a_script_needs(demo_export):
    export = demo_export("jsonl")
    lines = [json.loads(line) for line in (export / "probes.jsonl").read_text().splitlines()]
    assert {line["kind"] for line in lines} == {"original", "option_shuffle"}
    first = lines[0]
    assert first["prompt"].startswith(first["question"] + "\nOptions:\nA. ") and (export / first["image"]).is_file()
    assert len({line["probe_set"] for line in lines}) == 1


def test_the_batch_request_is_the_clients_request(tmp_path, answer_cfg):
    from medexp.answers.formats.base import Export
    from medexp.answers.openai_client import ChatClient

    probe = choice_probe(image=write_png(tmp_path / "x.png"))
    harness_format("openai_batch").write(Export([probe], answer_cfg, tmp_path, "x", "0" * 32, "served-id"))
    line = json.loads((tmp_path / "requests.jsonl").read_text())
    client = ChatClient("http://127.0.0.1:1/v1", "served-id")
    assert line == {"custom_id": probe.probe_id, "method": "POST", "url": "/v1/chat/completions",
                    "body": client.request_body(probe, answer_cfg)}
    assert OPTIONS[1] in line["body"]["messages"][0]["content"][1]["text"]
