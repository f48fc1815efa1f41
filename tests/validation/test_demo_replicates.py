"""The demo claims over replicates, from scratch (about an hour or more on 2 CPU cores):

    python -m pytest -m validation tests/validation/test_demo_replicates.py -s

runs ``python -m medexp experiment=demo_replicates`` (10 clean and 10 leaky demo models trained
into a fresh cache, with the five cohort models, through 260 model cells, and image_nn on 10
corpus seeds: 280 cells) on a fresh store with the joblib launcher, then ``python -m
medexp.report``, and prints the replicate table and the status of every demo claim. Set
MEDEXP_VALIDATION_JOBS=<n> for n joblib workers (default 2) and MEDEXP_VALIDATION_OUT=<folder> to
keep the report. It checks that every cell finished and that every demo claim has its evidence;
whether a claim holds is the measurement, printed, not asserted.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pandas as pd
import pytest

from tests.conftest import REPO, run_medexp

pytestmark = pytest.mark.validation

DEMO_CLAIMS = ("demo_answer_length_confound", "demo_cohort_baseline_check", "demo_cohort_clean_model",
               "demo_exch_detects_leak", "demo_exch_rank_no_position_trend", "demo_exch_release_specific",
               "demo_image_overlap")


@pytest.fixture(scope="module")
def replicates(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-replicates")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    jobs = os.environ.get("MEDEXP_VALIDATION_JOBS", "2")
    started = time.perf_counter()
    sweep = run_medexp("experiment=demo_replicates", "hydra/launcher=joblib", f"hydra.launcher.n_jobs={jobs}",
                       f"hydra.sweep.dir={root / 'sweep'}", f"paths.cache_dir={root / 'cache'}", f"tracking.uri={uri}",
                       timeout=6 * 3600)
    swept = time.perf_counter()
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    report = subprocess.run([sys.executable, "-m", "medexp.report", f"tracking.uri={uri}", f"output_dir={root / 'report'}",
                             f"claim_ids=[{','.join(DEMO_CLAIMS)}]"], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=3600)
    timing = {"sweep_seconds": swept - started, "report_seconds": time.perf_counter() - swept}
    if os.environ.get("MEDEXP_VALIDATION_OUT"):
        shutil.copytree(root / "report", os.environ["MEDEXP_VALIDATION_OUT"], dirs_exist_ok=True)
    return sweep, report, root / "report", timing


def test_every_replicate_cell_finishes(replicates):
    sweep, _, _, timing = replicates
    summary = re.search(r"(\d+) cells: (\d+) computed, (\d+) reused \(tracked earlier\), (\d+) failed", sweep.stdout)
    print(f"\n{summary.group(0) if summary else sweep.stdout[-2000:]}; sweep {timing['sweep_seconds']:.0f} s")
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    assert summary and (summary.group(1), summary.group(4)) == ("280", "0")


def test_every_demo_claim_has_its_evidence_and_the_table_ten_replicates_a_row(replicates):
    _, report, out, timing = replicates
    assert report.returncode == 0, report.stderr[-3000:]
    markdown = (out / "claims_to_evidence.md").read_text(encoding="utf-8")
    statuses = {claim.replace("\\_", "_"): status for claim, status in re.findall(r"^### (\S+): (.+)$", markdown, re.M)}
    table = pd.read_csv(out / "replicates.csv")
    columns = ["detector", "control", "models", "dose", "replicates", "flagged", "flag_rate", "flag_ci_low",
               "flag_ci_high", "significant", "significant_rate"]
    print("\n" + table[columns].to_string(index=False))
    print("\n" + "\n".join(f"{claim}: {status}" for claim, status in sorted(statuses.items())))
    print(f"report {timing['report_seconds']:.0f} s")
    assert set(statuses) == set(DEMO_CLAIMS) and "no evidence" not in statuses.values(), statuses
    # 13 detector x control pairs, each with a clean and a leaky row of 10 replicates
    assert len(table) == 26 and set(table["replicates"]) == {10}
    assert set(table["dose"]) == {0, 30}
