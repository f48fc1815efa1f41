"""``python -m medexp.report`` end to end on a temporary store holding hand-logged cell runs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from medexp.tracking import Tracker
from tests.conftest import REPO
from tests.report.tracked_cells import log_cell, replicate_model, tracking_config

IMAGE_NN = "image_nn-phash-demo"
SWEEP = pd.DataFrame({"alpha": [0.001, 0.01, 0.1], "k": [1, 6, 60], "tau": [0.1, 0.2, 0.3],
                      "expected_flag_rate": [0.001, 0.01, 0.1], "n_flagged": [90, 102, 140],
                      "flag_rate": [0.225, 0.255, 0.35], "p_value": [1e-60, 1e-61, 1e-30]})
PAIRS = pd.DataFrame({"model_a": ["demo_leaky", "demo_leaky", "demo_clean"],
                      "model_b": ["demo_clean", "demo_leaky_b", "demo_leaky_b"], "involves_target": [True, True, False],
                      "k": [10, 10, 10], "n": [400, 400, 400], "intersection": [1, 10, 2],
                      "jaccard": [0.0526, 1.0, 0.111], "lift": [4.0, 40.0, 8.0]})
USER_CLAIM = """\
id: user_leak_claim
sentence: The user's own claim, that demo_leaky is flagged by exch_rank under the release order.
evidence:
  - name: leaky
    select: {model: demo_leaky, bench: demo, detector: exch_rank, control: none}
    require: p_bonferroni < 0.05
statuses: {holds: confirmed, fails: refuted}
"""


def run_report(*overrides: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return subprocess.run([sys.executable, "-m", "medexp.report", *overrides], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture()
def store(tracking_uri, tmp_path):
    """A store with the cells of a small audit: exch_rank release/hash, image_nn with its negative
    control, a topk_jaccard cohort, the confound simulation, and one failed cell."""
    tracker = Tracker(tracking_config(tracking_uri), tmp_path)
    runs = {}
    for model, p_release, p_hash in (("demo_clean", 0.4, 0.7), ("demo_leaky", 0.002, 0.3)):
        runs[model] = log_cell(tracker, model, "demo", "exch_rank", "none", {"p_value": p_release, "flag": 0.0})
        log_cell(tracker, model, "demo", "exch_rank", "order_hash", {"p_value": p_hash, "flag": 0.0})
    image_params = {"detector.sweep_alphas": "[0.001, 0.01, 0.1]", "detector.embedder.name": "phash"}
    log_cell(tracker, "demo_leaky", "demo", IMAGE_NN, "none",
             {"p_value": 5e-61, "flag": 1.0, "image_flag_rate": 0.255, "tau_alpha": 0.01, "n_images_flagged": 102.0,
              "n_images": 400.0}, params={**image_params, "control.kind": "none"},
             files={"alpha_sweep.parquet": SWEEP})
    log_cell(tracker, "demo_leaky", "demo", IMAGE_NN, "negative_demo_ood",
             {"p_value": 1.0, "flag": 0.0, "image_flag_rate": 0.0, "tau_alpha": 0.01, "n_images_flagged": 0.0, "n_images": 300.0},
             params={**image_params, "control.kind": "negative_images", "control.images.name": "demo_ood"},
             files={"alpha_sweep.parquet": SWEEP.assign(n_flagged=0, flag_rate=0.0, p_value=1.0)})
    log_cell(tracker, "demo_leaky", "demo", "topk_jaccard", "none", {"p_value": 1e-19, "flag": 1.0},
             params={"detector.top_k": "10"}, files={"per_pair.parquet": PAIRS})
    for model, gain, rate in (("low_gain_a", 0.05, 0.0), ("high_gain_a", 1.0, 0.31)):
        log_cell(tracker, model, "synthetic", "mink_tail", "synthetic",
                 {"p_value": 0.5, "flag": float(rate > 0.05), "pr_delta_gt_100": rate},
                 params={"control.kind": "synthetic", f"control.cohort.{model}.gain": str(gain)})
    log_cell(tracker, "probe", "synthetic", "composition_sweep", "synthetic",
             {f"false_positive_flag_prob_{k}": float(k >= 2) for k in range(5)}, params={"control.kind": "synthetic"})
    runs["failed"] = log_cell(tracker, "demo_clean_s10", "demo", "exch", "none", {},
                              fail_with=RuntimeError("scorer ran out of memory"))
    return tracker, runs


def test_the_report_cli_writes_the_map_figures_and_a_report_run(store, tracking_uri, tmp_path):
    tracker, runs = store
    user = tmp_path / "my_conf"
    (user / "claims").mkdir(parents=True)
    (user / "claims" / "user_leak_claim.yaml").write_text(USER_CLAIM)
    out = tmp_path / "report"
    result = run_report(f"tracking.uri={tracking_uri}", f"output_dir={out}", "--config-dir", str(user))
    assert result.returncode == 0, result.stderr
    run_line = next(line for line in result.stdout.splitlines() if line.startswith("report run: "))
    report_run = tracker.get_run(run_line.removeprefix("report run: ").strip())
    assert report_run.tags["medexp.kind"] == "report" and report_run.status == "FINISHED"
    assert f"{out / 'claims_to_evidence.md'}" in result.stdout

    for name in ("claims_to_evidence.md", "claims_to_evidence.html", "claims_to_evidence.tex", "cells.csv",
                 "cells.parquet"):
        assert (out / name).stat().st_size > 0, name
    figures = sorted(path.name for path in (out / "figures").glob("*.png"))
    assert figures == ["fig1_exchangeability_exch_rank.png", "fig2_image_nn_flag_rates.png", "fig3_alpha_sweep.png",
                       "fig5_topk_jaccard.png", "fig7_confound.png"]

    markdown = (out / "claims_to_evidence.md").read_text()
    # the user's claim: Bonferroni over the two release cells, 0.002 x 2 = 0.004 < 0.05
    assert "user\\_leak\\_claim: confirmed" in markdown
    assert f"`{runs['demo_leaky']}`" in markdown and "| 0.004 |" in markdown
    # the image claim rests on replicates none of which ran here: "not run", listed apart with the
    # cells it selects, never "no evidence" (which says cells ran without giving the rule its values)
    not_run = markdown[markdown.index("## Not run"):markdown.index("## Claims")]
    assert "**demo\\_image\\_overlap** (not run)" in not_run
    assert "`model=any, bench=demo, detector=image_nn-phash-demo_s*, control=none`" in not_run
    assert "demo\\_image\\_overlap: no evidence" not in markdown and "demo\\_image\\_overlap: not run" not in markdown
    # a claim whose cells were never run names them; a failed run's error is shown
    assert "demo\\_exch\\_detects\\_leak: no evidence" in markdown
    assert "`model=demo_clean_s*,bench=demo,detector=exch,control=none`: no FINISHED run (latest: FAILED)" in markdown
    assert f"`{runs['failed']}` FAILED: RuntimeError: scorer ran out of memory" in markdown
    assert "![Fig. 1 (exch\\_rank)" in markdown and "(figures/fig1_exchangeability_exch_rank.png)" in markdown

    html = (out / "claims_to_evidence.html").read_text()
    assert html.count("data:image/png;base64,") == 5 and "user_leak_claim: confirmed" in html
    latex = (out / "claims_to_evidence.tex").read_text()
    assert r"\begin{tabular}" in latex and r"\textbf{confirmed}" in latex and runs["demo_leaky"][:8] in latex

    cells = pd.read_csv(out / "cells.csv").set_index("cell_key")
    leaky = cells.loc["model=demo_leaky,bench=demo,detector=exch_rank,control=none"]
    assert (leaky["family"], leaky["p_bonferroni"], leaky["q_bh"], leaky["family_size"]) == \
        ("exch_rank/none", pytest.approx(0.004), pytest.approx(0.004), 2)
    assert cells.loc["model=demo_clean_s10,bench=demo,detector=exch,control=none", "status"] == "FAILED"

    # the report run holds every file and counts the claims per status
    import mlflow

    client = mlflow.tracking.MlflowClient(tracking_uri)
    logged = {item.path for item in client.list_artifacts(report_run.run_id)}
    assert {"claims_to_evidence.md", "claims_to_evidence.html", "claims_to_evidence.tex", "cells.csv",
            "figures"} <= logged
    counts = report_run.metrics
    n_claims = len(list((REPO / "conf" / "claims").glob("*.yaml"))) + 1
    assert counts["n_claims"] == n_claims
    assert counts["claims_confirmed"] >= 1 and counts["claims_no_evidence"] >= 1 and counts["claims_not_run"] >= 1
    assert (counts["outcome_holds"] + counts["outcome_fails"] + counts["outcome_no_evidence"]
            + counts["outcome_not_run"]) == n_claims
    assert "statuses: " in result.stdout and "no evidence" in result.stdout


@pytest.mark.extended
def test_a_second_report_ignores_the_first_report_run(store, tracking_uri, tmp_path):
    outputs = []
    for name in ("first", "second"):
        result = run_report(f"tracking.uri={tracking_uri}", f"output_dir={tmp_path / name}",
                            "claim_ids=[demo_image_overlap]", "figures=false")
        assert result.returncode == 0, result.stderr
        outputs.append(pd.read_csv(tmp_path / name / "cells.csv"))
        assert not (tmp_path / name / "figures").exists()
    pd.testing.assert_frame_equal(outputs[0], outputs[1])
    assert "report" not in set(outputs[1]["detector"])


def test_a_bad_claim_file_stops_the_report_with_its_name(tracking_uri, tmp_path):
    (tmp_path / "claims").mkdir()
    (tmp_path / "claims" / "broken.yaml").write_text(textwrap.dedent("""\
        id: broken
        sentence: s
        evidence: [{name: x, require: "p_value < 0.05", quantifier: most}]
        statuses: {holds: a, fails: b}
        """))
    result = run_report(f"tracking.uri={tracking_uri}", f"output_dir={tmp_path / 'out'}", "--config-dir", str(tmp_path))
    assert result.returncode != 0
    assert "claims/broken.yaml" in result.stderr and "quantifier 'most' is not one of all, any, sign_test" in result.stderr
    assert not Path(tmp_path / "out").exists()


def test_search_cells_leaves_out_sweep_and_report_runs(tracking_uri, tmp_path):
    tracker = Tracker(tracking_config(tracking_uri), tmp_path)
    cell = log_cell(tracker, "m", "b", "exch_rank", "none", {"p_value": 0.5})
    for kind in ("sweep", "report"):
        other = log_cell(tracker, "m", "b", "exch_rank", "none", {"p_value": 0.01})
        tracker.set_tags(other, {"medexp.kind": kind})
    tracker.start("not a cell", {}, {})
    assert [run.run_id for run in tracker.search_cells()] == [cell]


@pytest.mark.slow  # about 25 s on 2 busy cores: 39 runs logged, then the report's subprocess
def test_the_report_resolves_replicate_claims_and_writes_the_replicate_table(tracking_uri, tmp_path):
    """Ten clean and ten leaky exch replicates (one leaky missed, one clean false positive), and nine
    of the ten image corpus replicates: the exch claim holds, the image claim has no evidence."""
    tracker = Tracker(tracking_config(tracking_uri), tmp_path)
    for position, seed in enumerate(range(10, 20)):
        for arm, p in (("leaky", 0.3 if position == 4 else 1e-4), ("clean", 0.001 if position == 7 else 0.6)):
            model, params = replicate_model(arm, seed)
            log_cell(tracker, model, "demo", "exch", "none", {"p_value": p, "flag": float(p < 0.01)}, params=params,
                     family=f"exch/none/replicate_s{seed}")
        if seed < 19:  # the last corpus seed never ran
            log_cell(tracker, "none", "demo", f"image_nn-phash-demo_s{seed}", "none",
                     {"p_value": 1e-40, "flag": 1.0, "truth_recall": 0.97, "n_flagged": 104.0},
                     params={"detector.corpus.source.demo_corpus.seed": str(seed)},
                     family=f"image_nn/none/replicate_s{seed}")
    out = tmp_path / "report"
    result = run_report(f"tracking.uri={tracking_uri}", f"output_dir={out}",
                        "claim_ids=[demo_exch_detects_leak,demo_image_overlap]")
    assert result.returncode == 0, result.stderr
    assert "replicates.csv" in result.stdout and "statuses: confirmed 1, no evidence 1" in result.stdout

    markdown = (out / "claims_to_evidence.md").read_text()
    assert "demo\\_exch\\_detects\\_leak: confirmed" in markdown
    assert "Count: 9 of 10 cells meet `p_bonferroni < 0.01`." in markdown  # the leaky arm
    assert "Count: 1 of 10 cells meet `p_bonferroni < 0.01`." in markdown  # the clean arm
    assert "demo\\_image\\_overlap: no evidence" in markdown
    assert ("`model=any, bench=demo, detector=image_nn-phash-demo_s*, control=none`: "
            "9 of the 10 expected cells have a finished run") in markdown
    assert "## Replicates" in markdown and "![Replicates:" in markdown

    table = pd.read_csv(out / "replicates.csv").set_index("models")
    assert list(table.index) == ["demo_clean", "demo_leaky_e30"]  # image corpus replicates have no model seed
    assert (table.loc["demo_leaky_e30", "flagged"], table.loc["demo_leaky_e30", "replicates"]) == (9, 10)
    assert (table.loc["demo_clean", "significant"], table.loc["demo_clean", "dose"]) == (1, 0)
    assert table.loc["demo_clean", "flag_ci_high"] == pytest.approx(0.4042, abs=1e-4)  # Wilson, 1 of 10
    assert (out / "figures" / "replicate_flag_rates.png").stat().st_size > 0
    latex = (out / "claims_to_evidence.tex").read_text()
    assert r"\label{tab:replicates}" in latex and r"exch & none & demo\_clean & 0 & 10 & 1/10 = 0.10" in latex
    html = (out / "claims_to_evidence.html").read_text()
    assert "<h2>Replicates</h2>" in html
    cells = pd.read_csv(out / "cells.csv").set_index("cell_key")
    leaky = cells.loc["model=demo_leaky_e30_s10,bench=demo,detector=exch,control=none"]
    assert (leaky["family"], leaky["family_size"], leaky["p_bonferroni"]) == ("exch/none/replicate_s10", 2, 2e-4)
