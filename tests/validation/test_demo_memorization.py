"""The memorization demo and its mitigation result, from scratch (minutes on 2 CPU cores):

    python -m pytest -m validation tests/validation/test_demo_memorization.py -s

trains ``python -m medexp.train experiment=demo_memorization`` (the pretrained demo ViT, then
full fine-tuning, LoRA and DP-LoRA at epsilon 1, both arms for seeds 123, 456, 789 and 1024, and
the VLM pair) into a fresh cache, runs ``python -m medexp experiment=demo_memorization`` and
prints the paper's Table 4 for the demo: accuracy and the most-memorised class per regime.
Set MEDEXP_VALIDATION_OUT=<file> to keep the table.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO, run_medexp

pytestmark = pytest.mark.validation

REGIMES = {"demo_vit": "Full fine-tuning", "demo_vit_lora": "LoRA only", "demo_vit_dp_lora": "DP-LoRA, epsilon = 1"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("memorization-demo")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    env["MEDEXP_CACHE"] = str(root / "cache")
    started = time.perf_counter()
    training = subprocess.run([sys.executable, "-m", "medexp.train", "experiment=demo_memorization",
                               f"tracking.uri={uri}"], cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    trained = time.perf_counter()
    assert training.returncode == 0, training.stderr[-3000:]
    cells = run_medexp("experiment=demo_memorization", f"paths.cache_dir={root / 'cache'}", f"tracking.uri={uri}",
                       timeout=3600)
    assert cells.returncode == 0, cells.stderr[-3000:]
    client = MlflowClient(uri)
    runs = {}
    for line in cells.stdout.splitlines():
        match = re.match(r"model=([\w_]+)-candidate-s123,bench=demo_findings,detector=(\w+),.*run_id=(\w+)", line)
        match = match or re.match(r"model=(demo_leaky),bench=demo,detector=(\w+),.*run_id=(\w+)", line)
        if match:
            runs[(match.group(1), match.group(2))] = client.get_run(match.group(3))
    timing = {"training_seconds": trained - started, "cells_seconds": time.perf_counter() - trained}
    return client, runs, timing, training.stdout


def _table(client, runs) -> pd.DataFrame:
    rows = []
    for config, regime in REGIMES.items():
        memorization, membership = runs[(config, "memorization")], runs[(config, "membership")]
        metrics = memorization.data.metrics
        classes = pd.read_parquet(client.download_artifacts(memorization.info.run_id, "per_class.parquet"))
        rows.append({
            "regime": regime,
            "accuracy": metrics["candidate_test_accuracy"],
            "epsilon": metrics.get("train_epsilon"),
            "mean_m_canaries": metrics["m_mean_members"],
            "mean_m_test": metrics["m_mean_nonmembers"],
            "worst_class": classes.loc[0, "class"],
            "worst_class_m": metrics["worst_class_m"],
            "worst_ci": f"[{classes.loc[0, 'm_ci_low']:.2f}, {classes.loc[0, 'm_ci_high']:.2f}]",
            "memorization_p": metrics["p_value"],
            "rarity_rho": metrics["rarity_spearman_rho"],
            "mx_auc": membership.data.metrics["mx_auc"],
            "lira_auc": membership.data.metrics["lira_auc"],
            "lira_tpr_at_1pct_fpr": membership.data.metrics["lira_tpr_at_fpr_0.01"],
        })
    return pd.DataFrame(rows)


def test_dp_lora_lowers_the_most_memorised_class(demo):
    client, runs, timing, _ = demo
    table = _table(client, runs)
    text = table.to_markdown(index=False, floatfmt=".3f") if _has_tabulate() else table.to_string(index=False)
    report = f"{text}\n\ntraining {timing['training_seconds']:.0f} s, cells {timing['cells_seconds']:.0f} s\n"
    print("\n" + report)
    if os.environ.get("MEDEXP_VALIDATION_OUT"):
        with open(os.environ["MEDEXP_VALIDATION_OUT"], "w", encoding="utf-8") as handle:
            handle.write(report)
    full, lora, dp = table["worst_class_m"]
    assert dp < full and dp < lora
    assert table.loc[0, "memorization_p"] < 0.01 and table.loc[1, "memorization_p"] < 0.01
    assert table.loc[2, "epsilon"] <= 1.0


def test_the_leaky_vlms_canaries_are_detected(demo):
    _, runs, _, _ = demo
    assert runs[("demo_leaky", "memorization")].data.metrics["flag"] == 1.0
    assert runs[("demo_leaky", "membership")].data.metrics["flag"] == 1.0


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True
