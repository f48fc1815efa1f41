"""lmms-eval itself on an exported task (marker ``harness``; lmms-eval cannot join the lock: it pins
wandb, pulls sentence-transformers, opencv and more). The test installs lmms-eval 0.7.3 with the
few packages its task loader and evaluator import into a side folder (from PyPI, once, under
``~/.cache/medexp/lmms-eval-0.7.3``), then, with that folder on the path of a child process:
lmms-eval's TaskManager loads the exported task folder, its evaluator asks the demo answering model,
and its EvaluationTracker writes the samples file. medexp imports it, and the cell equals the one
the same model gives answering in process.

    python -m pytest -m harness tests/harness -s
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from medexp.config import compose
from medexp.export import main as export_main
from medexp.kernel.cell import Cell
from medexp.runner.evaluate import evaluate
from tests.e2e.test_harness_round_trip import ANSWERING_MODEL, same

pytestmark = pytest.mark.harness

LMMS_EVAL = "lmms_eval==0.7.3"
# What lmms-eval 0.7.3's task loader and evaluator import beyond medexp's lock (found by importing
# lmms_eval.tasks and lmms_eval.evaluator until nothing was missing)
IMPORTED = ("loguru", "pytz", "tenacity", "evaluate", "sacrebleu", "portalocker", "tabulate", "colorama", "lxml")
SIDE = Path.home() / ".cache" / "medexp" / "lmms-eval-0.7.3"
SMALL = ("bench.max_examples=6",)


@pytest.fixture(scope="module")
def lmms_eval_path() -> Path:
    if not (SIDE / "lmms_eval").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", SIDE, LMMS_EVAL,
                        *IMPORTED], check=True, timeout=1800)
    return SIDE


@pytest.mark.parametrize("detector", ["option_order", "medvigil_demo"])
def test_lmms_eval_loads_an_exported_task_and_its_samples_import_to_the_white_box_cell(detector, lmms_eval_path,
                                                                                        demo_cache, tmp_path):
    from medexp.models import model_location

    model = compose([f"model={ANSWERING_MODEL}"]).model
    folder = model_location(model, demo_cache)
    export = tmp_path / "export"
    assert export_main([f"paths.cache_dir={demo_cache}", *SMALL, f"detector={detector}", "format=lmms_eval",
                        f"out={export}"]) == 0
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(lmms_eval_path), os.environ.get("PYTHONPATH", "")]),
                   "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, Path(__file__).with_name("lmms_eval_run.py"), export, folder,
                          export / "lmms_out"], env=environment, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    print(run.stdout)
    samples = list((export / "lmms_out").rglob("*_samples_medexp_*.jsonl"))
    assert len(samples) == 1

    def cell(*overrides):
        cfg = compose([f"paths.cache_dir={demo_cache}", *SMALL, f"detector={detector}", *overrides])
        return evaluate(cfg, Cell.from_config(cfg).seed(int(cfg.seed)))[0]

    imported = cell("model=responses", f"model.name={model.name}", "model.responses_format=lmms_eval",
                    f"model.responses_path={export / 'lmms_out'}")
    same(cell(f"model={ANSWERING_MODEL}"), imported)
    assert imported["n_answered"] == imported["n_probes"]
