"""A two-point detector atlas end to end: experiment=detector_atlas narrowed (in a user config
folder) to its text-side blocks at training seed 0, doses 0 and 30 (the suite's demo_clean and
demo_leaky: the same settings, so the same cached models), two cheap detectors on the first 120
examples, then the report: its dose-response table and figure hold both points."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from medexp.config import conf_dir
from tests.conftest import REPO, run_medexp



def two_point_atlas(conf: os.PathLike) -> str:
    """The real preset with its text-side blocks kept, seed 0, dose 30, exch_rank and membership
    with 500 permutations (in the blocks: the base config's detector has no such field; membership's
    shift control with 99); the override adding the folder to the search path."""
    preset = (conf_dir() / "experiment" / "detector_atlas.yaml").read_text(encoding="utf-8")
    config = yaml.safe_load(preset)
    blocks = [block for block in config["hydra"]["sweeper"]["grid"] if block["model"].endswith("_replicate")]
    assert len(blocks) == 4  # clean and leaky text-side replicates, membership with its reference pairs
    for block in blocks:
        block.update({"model.demo.seed": 0, "detector.n_permutations": 500})
        if block["detector"] != "membership":
            block["detector"] = "exch_rank"
        else:  # the shift control refits its classifier per permutation: 99 keep the cell to seconds
            block["detector.shift_permutations"] = 99
        if "model.demo.leak_epochs" in block:
            block["model.demo.leak_epochs"] = [30]
    config["hydra"]["sweeper"]["grid"] = blocks
    folder = os.path.join(conf, "experiment")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "atlas_two_points.yaml"), "w", encoding="utf-8") as handle:
        handle.write("# @package _global_\n" + yaml.safe_dump(config, sort_keys=False))
    return f"hydra.searchpath=[file://{conf}]"


@pytest.mark.extended
def test_two_point_atlas_runs_and_reports_its_dose_response(demo_cache, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    search_path = two_point_atlas(tmp_path / "conf")
    sweep = run_medexp(search_path, "experiment=atlas_two_points", "bench.max_examples=120",
                       f"paths.cache_dir={demo_cache}", f"tracking.uri={uri}",
                       f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    assert "4 cells: 4 computed, 0 reused (tracked earlier), 0 failed" in sweep.stdout
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    report = subprocess.run([sys.executable, "-m", "medexp.report", f"tracking.uri={uri}",
                             f"output_dir={tmp_path / 'report'}", "claim_ids=[]"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=900)
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    replicates = pd.read_csv(tmp_path / "report" / "replicates.csv")
    assert sorted(zip(replicates.detector, replicates.dose, replicates.replicates)) == [
        ("exch_rank", 0, 1), ("exch_rank", 30, 1), ("membership", 0, 1), ("membership", 30, 1)]
    assert set(replicates.resampling_unit) == {"an independently trained model (training seed model.demo.seed)"}
    # membership tells the leaked test set from held-out items at dose 30 and not at dose 0
    membership = replicates[replicates.detector == "membership"].set_index("dose")
    assert (membership.loc[0, "flagged"], membership.loc[30, "flagged"]) == (0, 1)
    text = (tmp_path / "report" / "claims_to_evidence.md").read_text(encoding="utf-8")
    atlas = text.split("## Dose response", 1)[1].split("\n## ", 1)[0]
    assert "| dose 0 | dose 30 |" in atlas and atlas.count("`demo_clean`") == 2
    assert (tmp_path / "report" / "figures" / "dose_response.png").stat().st_size > 10_000
