"""The issue's "done when": the demo grid through the joblib launcher, then the report; and a
user's own config folder adding a model, a benchmark and a claim without touching Python."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO, parse_summary, run_medexp

pytestmark = pytest.mark.slow

# The claim whose cells the offline demo grid produces; the demo_* claims rest on replicates
# (experiment=demo_replicates), the others on the real audit.
DEMO_GRID_CLAIMS = {"calibration_confound"}


def run_report(*overrides: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return subprocess.run([sys.executable, "-m", "medexp.report", *overrides], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


def statuses(markdown: str) -> dict[str, str]:
    """Claim id -> status, from the claim headings of claims_to_evidence.md and its list of claims not run."""
    found = re.findall(r"^### (\S+): (.+)$", markdown, re.M) + re.findall(r"^- \*\*(\S+)\*\* \((not run)\)", markdown, re.M)
    return {claim.replace("\\_", "_"): status for claim, status in found}


@pytest.mark.long
def test_demo_grid_with_joblib_then_the_report(demo_cache, tracking_uri, tmp_path):
    sweep = run_medexp("-m", "experiment=demo_grid", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                       f"hydra.sweep.dir={tmp_path / 'sweep'}", f"paths.cache_dir={demo_cache}",
                       f"tracking.uri={tracking_uri}", timeout=2400)
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    summary = re.search(r"(\d+) cells: (\d+) computed, (\d+) reused \(tracked earlier\), (\d+) failed", sweep.stdout)
    assert summary and summary.group(4) == "0" and int(summary.group(1)) == int(summary.group(2)) == 34

    out = tmp_path / "report"
    report = run_report(f"tracking.uri={tracking_uri}", f"output_dir={out}")
    assert report.returncode == 0, report.stderr[-3000:]
    for suffix in ("md", "html", "tex"):
        assert (out / f"claims_to_evidence.{suffix}").stat().st_size > 0
    found = statuses((out / "claims_to_evidence.md").read_text(encoding="utf-8"))
    claim_files = {path.stem for path in (REPO / "conf" / "claims").glob("*.yaml")}
    assert set(found) == claim_files  # every claim resolved to a status
    resolved = {claim: status for claim, status in found.items() if status not in ("no evidence", "not run")}
    assert set(resolved) == DEMO_GRID_CLAIMS, found
    assert resolved["calibration_confound"] == "collapses"
    # a demo claim resting on replicates, none of which the grid runs, is "not run", not "no evidence"
    assert found["demo_exch_detects_leak"] == "not run"

    # The planted ground truth decides these single cells (the claims ask it of replicates).
    cells = pd.read_csv(out / "cells.csv")
    by_key = cells.set_index("cell_key")
    assert by_key.loc["model=demo_leaky,bench=demo,detector=exch,control=none", "p_bonferroni"] < 0.01
    assert by_key.loc["model=none,bench=demo,detector=image_nn-phash-demo,control=none", "p_bonferroni"] < 0.01
    # Family corrections in the cells table are Bonferroni over each family, by hand.
    for _, family in cells.dropna(subset=["p_value"]).groupby("family"):
        expected = (family["p_value"] * len(family)).clip(upper=1.0)
        assert family["p_bonferroni"].to_numpy() == pytest.approx(expected.to_numpy())

    client = MlflowClient(tracking_uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "medexp"]
    reports = client.search_runs([experiment.experiment_id], "tags.`medexp.kind` = 'report'")
    assert len(reports) == 1
    logged = {item.path for item in client.list_artifacts(reports[0].info.run_id)}
    assert {"claims_to_evidence.md", "claims_to_evidence.html", "claims_to_evidence.tex"} <= logged


@pytest.mark.extended
def test_user_config_folder_adds_a_model_a_benchmark_and_a_claim(demo_cache, tracking_uri, tmp_path):
    from medexp.demo.cache import demo_benchmark_root
    from medexp.config import compose
    from tests.models.tiny import build

    checkpoint = build("qwen2_5_vl", tmp_path / "checkpoints")  # a local save_pretrained directory
    scans = demo_benchmark_root(compose([]).bench.demo, demo_cache)
    user = tmp_path / "my_conf"
    for group in ("model", "bench", "claims"):
        (user / group).mkdir(parents=True)
    (user / "model" / "my_qwen.yaml").write_text(
        f"name: my_qwen\nfamily: qwen2_5_vl\npretrained: {checkpoint}\ndevice: cpu\n", encoding="utf-8")
    (user / "bench" / "my_scans.yaml").write_text(
        f"name: my_scans\nformat: local\nroot: {scans}\nsplit: test\nmax_examples: 60\n", encoding="utf-8")
    (user / "claims" / "my_claim.yaml").write_text(
        "id: my_claim\n"
        "sentence: my_qwen was audited on all 60 of my scans.\n"
        "source: a user's own config folder\n"
        "evidence:\n"
        "  - name: audited\n"
        "    select: {model: my_qwen, bench: my_scans, detector: exch_rank, control: none}\n"
        "    require: n_examples == 60\n"
        "statuses: {holds: confirmed, fails: refuted}\n", encoding="utf-8")

    cell = run_medexp("--config-dir", str(user), "model=my_qwen", "bench=my_scans", "detector=exch_rank",
                      "detector.n_permutations=500", f"paths.cache_dir={demo_cache}", f"tracking.uri={tracking_uri}")
    assert cell.returncode == 0, cell.stderr[-3000:]
    run_id = parse_summary(cell.stdout)["run_id"]

    out = tmp_path / "report"
    report = run_report("--config-dir", str(user), f"tracking.uri={tracking_uri}", f"output_dir={out}",
                        "claim_ids=[my_claim]")
    assert report.returncode == 0, report.stderr[-3000:]
    markdown = (out / "claims_to_evidence.md").read_text(encoding="utf-8")
    assert statuses(markdown) == {"my_claim": "confirmed"}
    assert run_id in markdown  # the claim cites the run it rests on

    # A typo in the user's YAML is refused at composition, naming the key.
    (user / "model" / "my_typo.yaml").write_text("name: my_typo\nfamily: qwen2_5_vl\npretrainned: x\n", encoding="utf-8")
    typo = run_medexp("--config-dir", str(user), "model=my_typo", "--cfg", "job")
    assert typo.returncode != 0 and "pretrainned" in typo.stderr
