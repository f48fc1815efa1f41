"""Formats as the real tools read and write them (issue 56): export folders that hold several
formats and survive an interruption, VLMEvalKit's dataset names and output folder, OpenAI Batch
shards and reasoning models, LLaVA-Med's question file never taken for answers, lmms-eval's YAML
through a YAML parser, and each refusal with its message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from medexp.answers.formats import harness_format
from medexp.answers.formats.base import Export
from medexp.answers.formats.manifest import read_manifest
from medexp.config import compose
from medexp.export import main as export_main
from medexp.kernel.cell import Cell
from medexp.kernel.hashing import file_sha256
from medexp.runner.cell_run import run_cell
from tests.answers.conftest import text_probe
from tests.answers.exports import imported, jsonl_replies
from tests.answers.server import ChatServer, Fault


# ------------------------------------------------------------------------------------ export folders
def test_a_second_format_exported_into_the_folder_leaves_the_first_ones_manifest(demo_export, demo_cache, tmp_path):
    out = tmp_path / "both"
    demo_export("jsonl", out=out)
    replies = jsonl_replies(out)
    demo_export("lmms_eval", out=out)
    assert {path.name for path in out.glob("manifest-*.json")} == {"manifest-jsonl.json", "manifest-lmms_eval.json"}
    assert list(imported(demo_cache, replies, "jsonl")["correct"]) == [True] * 12


def test_another_probe_set_in_any_format_keeps_its_folder(demo_export, demo_cache, tmp_path, capsys):
    out = demo_export("jsonl", out=tmp_path / "taken")
    status = export_main([f"paths.cache_dir={demo_cache}", "bench.max_examples=6", "detector=option_order", "seed=1",
                          "format=lmms_eval", f"out={out}"])
    error = capsys.readouterr().err
    assert status == 1 and "holds the export of another probe set" in error and "manifest-jsonl.json" in error
    assert not list(out.glob("manifest-lmms_eval.json"))


def test_the_manifest_lists_every_image_with_its_sha256(demo_export):
    out = demo_export("jsonl")
    files = read_manifest(out / "manifest-jsonl.json").files
    images = {name: digest for name, digest in files.items() if name.startswith("images/")}
    assert len(images) == 6 == len(list((out / "images").iterdir()))
    assert all(file_sha256(out / name) == digest == Path(name).stem for name, digest in images.items())


def test_an_interrupted_export_is_resumed_whole(demo_export):
    out = demo_export("jsonl")
    before = {path.relative_to(out): path.read_bytes() for path in out.rglob("*") if path.is_file()}
    cut = next((out / "images").iterdir())
    cut.write_bytes(cut.read_bytes()[:20])  # an image an older, non-atomic copy left truncated
    (out / "manifest-jsonl.json").unlink()  # the manifest is written last: the export stopped before it
    (out / "probes.jsonl").unlink()
    demo_export("jsonl", out=out)
    after = {path.relative_to(out): path.read_bytes() for path in out.rglob("*") if path.is_file()}
    assert after == before and not list(out.rglob("*.tmp"))


# ------------------------------------------------------------------------------------------- VLMEvalKit
def test_vlmevalkit_names_an_open_ended_dataset_as_vlmevalkit_types_it(demo_export):
    out = demo_export("vlmevalkit", "slot_guess")  # free-text questions with their images
    (dataset,) = out.glob("*.tsv")
    assert dataset.stem.endswith("_openended")  # VLMEvalKit's DATASET_TYPE: VQA only when 'openended' in the name
    assert "A" not in pd.read_csv(dataset, sep="\t", nrows=1) and "image" in pd.read_csv(dataset, sep="\t", nrows=1)


def test_vlmevalkit_refuses_free_text_questions_without_an_image(tmp_path, answer_cfg):
    blind = [text_probe(example_id=f"ex{i}", kind="text_only") for i in range(3)]
    with pytest.raises(ValueError, match=r"VLMEvalKit has no custom dataset for a free-text question without an image"
                                         r".* 3 probe\(s\) of this set are such \(kinds \['text_only'\]\)"):
        harness_format("vlmevalkit").write(Export(blind, answer_cfg, tmp_path, "x", "0" * 32, "m"))


def vlmevalkit_outputs(export: Path, reply=lambda row: row["answer"]) -> Path:
    """VLMEvalKit's output folder after `run.py --model demo_model --data <each dataset>`: the run's
    folder with each prediction sheet (.xlsx, its default), the evaluation's files beside it, and
    links to them in outputs/<model>/, as run.py makes them."""
    model = export / "outputs" / "demo_model"
    run = model / "T20261202_Gabc1234"
    run.mkdir(parents=True)
    for dataset in export.glob("*.tsv"):
        rows = pd.read_csv(dataset, sep="\t", dtype=str).drop(columns=["image"], errors="ignore")
        sheet = rows.assign(prediction=[reply(row) for _, row in rows.iterrows()])
        stem = f"demo_model_{dataset.stem}"
        sheet.to_excel(run / f"{stem}.xlsx", index=False)
        sheet.assign(hit=1, log="").to_excel(run / f"{stem}_exact_matching_result.xlsx", index=False)
        pd.DataFrame({"split": ["none"], "Overall": [1.0]}).to_csv(run / f"{stem}_acc.csv", index=False)
    for path in run.iterdir():
        os.symlink(path, model / path.name)
    return export / "outputs"


def test_vlmevalkit_output_folder_is_read_once_per_prediction_sheet(demo_export, demo_cache):
    export = demo_export("vlmevalkit")
    outputs = vlmevalkit_outputs(export)
    table = imported(demo_cache, outputs, "vlmevalkit")
    assert list(table["correct"]) == [True] * 12 and list(table["status"]) == ["ok"] * 12


def test_an_export_folder_without_predictions_is_refused(demo_export, demo_cache):
    export = demo_export("vlmevalkit")
    unanswered = r"no reply file matching \*.xlsx or \*.tsv or \*.csv in this folder \(only the export's own files"
    with pytest.raises(FileNotFoundError, match=unanswered):
        imported(demo_cache, export, "vlmevalkit")


# ------------------------------------------------------------------------------------------ OpenAI Batch
def batch_output_line(request: dict, content: str) -> str:
    return json.dumps({"id": "batch_req_1", "custom_id": request["custom_id"], "error": None, "response": {
        "status_code": 200, "request_id": "req_1", "body": {"choices": [{"message": {"content": content}}]}}})


def test_batch_requests_are_split_within_the_limits_and_the_folder_reads_outputs_and_errors(demo_export, demo_cache):
    export = demo_export("openai_batch", "option_order", "format_options.batch_max_requests=5")
    shards = sorted(export.glob("requests-*.jsonl"))
    assert [path.name for path in shards] == [f"requests-{i}-of-3.jsonl" for i in (1, 2, 3)]
    requests = [[json.loads(line) for line in path.read_text().splitlines()] for path in shards]
    assert [len(shard) for shard in requests] == [5, 5, 2]
    assert read_manifest(export / "manifest-openai_batch.json").options["batch_max_requests"] == 5
    flat = [request for shard in requests for request in shard]
    by_bytes = demo_export("openai_batch", "option_order", "format_options.batch_max_bytes=150000",
                           out=export.parent / "by_bytes")
    sizes = [path.stat().st_size for path in by_bytes.glob("requests-*.jsonl")]
    assert len(sizes) > 1 and max(sizes) <= 150000
    assert sum(len(path.read_text().splitlines()) for path in by_bytes.glob("requests-*.jsonl")) == 12
    demo_export("openai_batch", "option_order", out=by_bytes)  # again with the default limits: one file, no shard left
    assert [path.name for path in by_bytes.glob("requests*.jsonl")] == ["requests.jsonl"]
    # a batch's output file and its error file, beside the request shards
    gold = {probe_id: letter for probe_id, letter in zip(
        [request["custom_id"] for request in flat], imported_gold(demo_cache, export))}
    (export / "batch_1_output.jsonl").write_text("".join(batch_output_line(request, gold[request["custom_id"]]) + "\n"
                                                         for request in flat[1:]))
    (export / "batch_1_error.jsonl").write_text(json.dumps({
        "id": "batch_req_0", "custom_id": flat[0]["custom_id"], "response": None,
        "error": {"code": "rate_limit_exceeded", "message": "Rate limit reached"}}) + "\n")
    table = imported(demo_cache, export, "openai_batch")
    assert list(table["status"]) == ["error"] + ["ok"] * 11 and table["correct"].iloc[1:].all()
    assert table["error_cause"].iloc[0] == "rate_limited"


def imported_gold(demo_cache, export: Path) -> list[str]:
    """The golds of the exported probes, in the export's order."""
    from medexp.evaluators.mmdetect import option_order_probes
    from medexp.export import _context

    cfg = compose([f"paths.cache_dir={demo_cache}", "bench.max_examples=6", "detector=option_order"])
    return [probe.gold for probe in option_order_probes(_context(cfg)).probes]


def test_a_request_over_the_byte_limit_is_refused(demo_cache, tmp_path, capsys):
    status = export_main([f"paths.cache_dir={demo_cache}", "bench.max_examples=6", "detector=option_order",
                          "format=openai_batch", f"out={tmp_path}", "format_options.batch_max_bytes=1000"])
    assert status == 1
    error = capsys.readouterr().err
    assert "over batch_max_bytes=1000 (its image inline as base64): no input file can hold it" in error


def test_a_reasoning_model_is_asked_with_max_completion_tokens_and_no_temperature(demo_export):
    export = demo_export("openai_batch", "option_order", "format_options.reasoning_model=true")
    body = json.loads((export / "requests.jsonl").read_text().splitlines()[0])["body"]
    assert body["max_completion_tokens"] == 8 and "max_tokens" not in body and "temperature" not in body


def test_an_unknown_format_option_is_named(demo_cache, tmp_path, capsys):
    status = export_main([f"paths.cache_dir={demo_cache}", "detector=option_order", "format=jsonl", f"out={tmp_path}",
                          "format_options.batch_max_requests=5"])
    assert status == 2
    assert "format=jsonl has no option 'batch_max_requests'; its options: none" in capsys.readouterr().err


# -------------------------------------------------------------------------------------------- LLaVA-Med
def test_a_llava_med_question_file_is_not_taken_for_answers(demo_export, demo_cache, tmp_path):
    export = demo_export("llava_med")
    moved = tmp_path / "elsewhere" / "questions.jsonl"  # away from its manifest: told by its fields alone
    moved.parent.mkdir()
    moved.write_bytes((export / "questions.jsonl").read_bytes())
    with pytest.raises(ValueError, match="is a LLaVA-Med question file .* none of the answer file's \\['answer_id', "
                                         "'model_id', 'prompt'\\]\\): its text is the prompt, not a reply"):
        imported(demo_cache, moved, "llava_med")
    with pytest.raises(ValueError, match="questions.jsonl is a file the export wrote for the harness \\(llava_med\\), "
                                         "not the harness's replies"):
        imported(demo_cache, export / "questions.jsonl", "llava_med")


def test_an_export_folder_without_replies_ends_the_cell_failed(demo_export, demo_cache, tmp_path):
    export = demo_export("llava_med")
    cfg = compose([f"paths.cache_dir={demo_cache}", "bench.max_examples=6", "detector=option_order", "model=responses",
                   "model.name=not_yet_run", f"model.responses_path={export}", "model.responses_format=llava_med",
                   f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"])
    outcome = run_cell(cfg)
    assert outcome.status == "FAILED" and "p_value" not in outcome.metrics
    assert "only the export's own files: the harness has not answered it yet" in outcome.error
    assert outcome.cell_key == Cell.from_config(cfg).key


# -------------------------------------------------------------------------------------------- lmms-eval
def test_the_lmms_eval_yaml_holds_a_path_with_a_colon_and_a_hash(demo_export, tmp_path):
    out = demo_export("lmms_eval", out=tmp_path / "runs: 2026 #1")
    (task,) = out.glob("*/*.yaml")

    class Loader(yaml.SafeLoader):  # lmms-eval's loader reads !function as a function of utils.py
        pass

    Loader.add_constructor("!function", lambda loader, node: ("function", loader.construct_scalar(node)))
    spec = yaml.load(task.read_text(), Loader=Loader)
    assert Path(spec["dataset_kwargs"]["data_files"]["test"]) == (task.parent / f"{task.stem}.jsonl").resolve()
    assert spec["doc_to_text"] == ("function", "utils.doc_to_text") and spec["generation_kwargs"]["do_sample"] is False


# ---------------------------------------------------------------------------------------------- Inspect
def test_inspect_logs_keep_a_refusal_and_a_failed_sample_as_what_they_are(demo_export, demo_cache, tmp_path):
    export = demo_export("inspect_ai")
    with pytest.raises(FileNotFoundError, match=r"no reply file matching \*.eval or \*.json in this folder \(only the "
                                                r"export's own files"):
        imported(demo_cache, export, "inspect_ai")  # the task's folder before inspect eval ran
    (data,) = export.glob("medexp_*.jsonl")
    lines = [json.loads(line) for line in data.read_text().splitlines()]
    filtered, refused_request = lines[0]["prompt"], lines[1]["prompt"]
    content_filter = {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "scripted-vlm",
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": ""},
                                   "finish_reason": "content_filter"}],
                      "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}}

    def faults(prompt: str, body: dict):
        if prompt == filtered:
            return Fault(status=200, payload=content_filter)
        return Fault(status=400) if prompt == refused_request else None

    with ChatServer(answer=lambda prompt, body: "A", fault_rule=faults) as server:
        subprocess.run([Path(sys.executable).parent / "inspect", "eval", next(export.glob("medexp_*.py")).name,
                        "--model", "openai/scripted-vlm", "--model-base-url", server.base_url, "--log-dir", "logs",
                        "--display", "none", "--no-fail-on-error"], cwd=export, check=True, timeout=600,
                       env={**os.environ, "OPENAI_API_KEY": "not-checked"})
    table = imported(demo_cache, export / "logs", "inspect_ai")
    by_probe = table.set_index("probe_id")
    assert by_probe.loc[lines[0]["probe_id"], "error_cause"] == "refused"
    assert by_probe.loc[lines[1]["probe_id"], "error_cause"] == "http_4xx"
    assert "scripted failure 400" in by_probe.loc[lines[1]["probe_id"], "error"]
    assert (table["status"] == "ok").sum() == 10 and set(table.loc[table["status"] == "ok", "response"]) == {"A"}
