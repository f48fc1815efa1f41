"""Probes out, replies in (issue 48): every answering detector's probe set on the demo, written by
``python -m medexp.export`` in each harness format, answered outside medexp by a program that reads
only the exported files, and imported back through ``model=responses``, gives exactly the cell the
same model gives when medexp asks it itself: every metric, the p-value included.

- ``openai_batch``: ``tests/harness/answer_batch.py`` (standard library only) posts each request of
  the Batch input file to medexp's scripted OpenAI-compatible test server and writes the Batch
  output file; the in-process cell asks the same server as ``model=openai_compatible``.
- ``jsonl``, ``vlmevalkit``, ``lmms_eval``: ``tests/harness/demo_model_harness.py`` (transformers, no
  medexp) answers with the demo answering model, reading the probe lines, VLMEvalKit's dataset TSVs
  (and wording: the in-process cell is given VLMEvalKit's prompt as its answer templates) or the
  lmms-eval task folder (its YAML, data file and utils.py), and writes the reply JSONL, the
  prediction sheets, or lmms-eval 0.7's samples file; the in-process cell asks the model white box.
- ``inspect_ai`` (issue 56): Inspect itself (``inspect eval``, inspect-ai from the lock) runs the
  exported task file against the scripted server and writes its eval log, which the import reads
  with Inspect's own ``read_eval_log``; the in-process cell asks the same server.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from medexp.config import compose
from medexp.export import main as export_main
from medexp.kernel.cell import Cell
from medexp.runner.evaluate import evaluate
from tests.answers.server import ChatServer

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

HARNESS = Path(__file__).resolve().parents[1] / "harness"
DETECTORS = ("option_order", "text_only", "slot_guess", "perturbation_gap", "medvigil_demo", "overlap_gap_answers",
             "none_option", "renumbered_options", "open_ended", "source_naming_demo")
# The newer probes' server round trips run with the extended marker, to keep the default suite within its
# 15 minutes; the demo model's round trip (extended too) covers all of DETECTORS.
NEWER_PROBES = ("none_option", "renumbered_options", "open_ended", "source_naming_demo")
SERVED = [pytest.param(name, marks=pytest.mark.extended) if name in NEWER_PROBES else name for name in DETECTORS]
SMALL = ("bench.max_examples=6",)
ANSWERING_MODEL = "demo_leaky_mc"
# VLMEvalKit's own prompt (ImageMCQDataset / TextMCQDataset.build_prompt; a question alone without options)
VLMEVALKIT_WORDING = (
    "detector.answer.choice_template='Question: {question}\nOptions:\n{options}\n"
    "Please select the correct answer from the options above. \n'",
    "detector.answer.free_text_template='{question}'",
)


def scripted_reply(prompt: str, body: dict) -> str:
    """A server with a stable, mixed record: a letter (or a word of the prompt) chosen by the
    prompt's hash, so arms worded differently get different replies, some right, some wrong."""
    digest = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
    letters = re.findall(r"^([A-Z])\. ", prompt, re.MULTILINE)
    if letters:
        return letters[digest % len(letters)]
    words = re.findall(r"[a-z]+", prompt.lower())
    return words[digest % len(words)]


def cell(cache: Path, *overrides: str) -> dict[str, float]:
    cfg = compose([f"paths.cache_dir={cache}", *SMALL, *overrides])
    metrics, _ = evaluate(cfg, Cell.from_config(cfg).seed(int(cfg.seed)))
    return metrics


def export(cache: Path, out: Path, fmt: str, detector: str, *overrides: str) -> Path:
    status = export_main([f"paths.cache_dir={cache}", *SMALL, f"detector={detector}", f"format={fmt}", f"out={out}",
                          *overrides])
    assert status == 0
    return out


def same(left: dict[str, float], right: dict[str, float]) -> None:
    """Every metric of the in-process cell, equal in the imported cell (NaN equal to NaN)."""
    assert set(left) == set(right)
    differing = {key: (left[key], right[key]) for key in left
                 if not (left[key] == right[key] or (math.isnan(left[key]) and math.isnan(right[key])))}
    assert differing == {}


@pytest.fixture(scope="module")
def answering_cache(demo_cache, tmp_path_factory) -> Path:
    """The session's demo cache with the demo answering model installed (it ships)."""
    from medexp.models import model_location

    model_location(compose([f"model={ANSWERING_MODEL}"]).model, demo_cache)
    return demo_cache


@pytest.mark.parametrize("detector", SERVED)
def test_a_batch_export_answered_through_a_server_imports_to_the_served_cells_result(detector, demo_cache, tmp_path):
    with ChatServer(answer=scripted_reply) as server:
        served = ("model=openai_compatible", f"model.base_url={server.base_url}", "model.name=scripted",
                  "model.pretrained=scripted-vlm", f"detector={detector}")
        asked = cell(demo_cache, *served)
        out = export(demo_cache, tmp_path / "export", "openai_batch", detector, "model_id=scripted-vlm")
        root = server.base_url.removesuffix("/v1")
        subprocess.run([sys.executable, HARNESS / "answer_batch.py", out / "requests.jsonl", root,
                        out / "output.jsonl"], check=True, timeout=600)
    imported = cell(demo_cache, "model=responses", "model.name=scripted", "model.responses_format=openai_batch",
                    f"model.responses_path={out / 'output.jsonl'}", f"detector={detector}")
    same(asked, imported)
    assert imported["n_answered"] == imported["n_probes"] > 0


@pytest.mark.parametrize("detector", SERVED)
def test_an_inspect_task_run_by_inspect_itself_imports_to_the_served_cells_result(detector, demo_cache, tmp_path):
    inspect = Path(sys.executable).parent / "inspect"  # inspect-ai's command, installed with the lock
    with ChatServer(answer=scripted_reply) as server:
        served = ("model=openai_compatible", f"model.base_url={server.base_url}", "model.name=scripted",
                  "model.pretrained=scripted-vlm", f"detector={detector}")
        asked = cell(demo_cache, *served)
        out = export(demo_cache, tmp_path / "export", "inspect_ai", detector)
        task_file = next(out.glob("medexp_*.py"))
        subprocess.run([inspect, "eval", task_file.name, "--model", "openai/scripted-vlm", "--model-base-url",
                        server.base_url, "--log-dir", "logs", "--display", "none"], cwd=out, check=True, timeout=600,
                       env={**os.environ, "OPENAI_API_KEY": "not-checked"})
        assert len(server.requests) == 2 * len(list((out / task_file.with_suffix(".jsonl").name).open()))
    imported = cell(demo_cache, "model=responses", "model.name=scripted", "model.responses_format=inspect_ai",
                    f"model.responses_path={out / 'logs'}", f"detector={detector}")
    same(asked, imported)
    assert imported["n_answered"] == imported["n_probes"] > 0


@pytest.mark.parametrize("fmt", ("jsonl", "vlmevalkit", "lmms_eval"))
@pytest.mark.extended
def test_an_export_answered_by_the_demo_model_outside_medexp_imports_to_its_white_box_result(
        fmt, answering_cache, tmp_path):
    from medexp.models import model_location

    wording = VLMEVALKIT_WORDING if fmt == "vlmevalkit" else ()
    exports = {detector: export(answering_cache, tmp_path / detector, fmt, detector, *wording)
               for detector in DETECTORS}
    model_folder = model_location(compose([f"model={ANSWERING_MODEL}"]).model, answering_cache)
    subprocess.run([sys.executable, HARNESS / "demo_model_harness.py", fmt, model_folder, *exports.values()],
                   check=True, timeout=1200)
    for detector, folder in exports.items():
        replies = folder / ("replies.jsonl" if fmt == "jsonl" else "replies")
        asked = cell(answering_cache, f"model={ANSWERING_MODEL}", f"detector={detector}", *wording)
        imported = cell(answering_cache, "model=responses", f"model.name={compose([f'model={ANSWERING_MODEL}']).model.name}",
                        f"model.responses_format={fmt}", f"model.responses_path={replies}", f"detector={detector}",
                        *wording)
        same(asked, imported)
