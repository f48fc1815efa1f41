"""perf/gpu_families.py, the script behind the H200 rates ``medexp.plan`` uses, in its CPU check
mode (every stack one layer deep, float32, one scan): the published architecture's widths with
the offline tokenizer's token ids, scored through medexp's scorers whole and with shared
prefixes. Not in the default suite (a minute or two on 2 cores): ``python -m pytest -m perf
tests/perf/test_gpu_families_script.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.perf
REPO = Path(__file__).resolve().parents[2]


def test_check_mode_scores_two_families_and_counts_their_flops(tmp_path):
    out = tmp_path / "families.json"
    result = subprocess.run(
        [sys.executable, "perf/gpu_families.py", "--check", "--images", "1", "--questions", "3",
         "--models", "qwen2_5_vl,blip2", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    qwen, blip = report["models"]
    assert "error" not in qwen and "error" not in blip, (qwen, blip)
    # Qwen2.5-VL: a 512 px scan is 324 image tokens by the published processor; shared prefixes
    # process the one scan once and compute fewer tokens than the three questions whole.
    assert qwen["image_tokens"] == 324 and qwen["prefix_tokens"] < qwen["tokens_per_example"]
    assert qwen["shared_prefix"]["images_processed"] == 1
    assert qwen["shared_prefix"]["tokens_computed"] < qwen["plain"]["tokens_computed"]
    assert qwen["shared_prefix"]["flops"] < qwen["plain"]["flops"]
    # BLIP-2 scores whole (no shared-prefix path): 32 query tokens stand for the scan.
    assert blip["image_tokens"] == 32 and "shared_prefix" not in blip
    for model in (qwen, blip):
        run = model["plain"]
        assert run["achieved_tflops"] == pytest.approx(run["flops"] / run["seconds"] / 1e12)
