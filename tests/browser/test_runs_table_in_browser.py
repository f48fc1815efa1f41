"""The MLflow UI as the comparison surface, in a real browser (marker ``browser``; needs chromium).

A two-cell grid (synthetic cohort models, no weights: seconds) runs into an ``mlflow server``;
headless Chromium, with a fresh profile (so the UI's sidebar switch is at its default, GenAI),
opens the address medexp gives for the experiment's runs table. From the page's DOM: the runs
table is shown with each cell on a row of its own (not collapsed under the sweep run), and its
model, bench, detector, control, p-value and flag columns hold the run's values. A screenshot is
taken of the same page.
"""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest
from mlflow.tracking import MlflowClient

from medexp.tracking.ui import COMPARED_METRICS, COMPARED_TAGS, GROUP_BY_TAG, runs_table_url
from tests.browser.dom import table_cells
from tests.conftest import run_medexp

pytestmark = pytest.mark.browser

WINDOW = (1600, 1000)
# Two cells of the confound simulation (conf/experiment/confound_simulation.yaml): a low-gain model
# (not flagged, p-value 1) and a high-gain one (flagged), so the columns differ between the rows.
GRID = ("-m", "model=synthetic", "model.name=low_gain_a,high_gain_a", "bench=synthetic", "control=synthetic",
        "seed=20260531", "detector=mink_tail", "detector.cohort=[]", "detector.thresholds=[50,100]",
        "detector.flag_threshold=100", "detector.flag_fraction=0.05", "detector.strata=[answer_type]")


@pytest.fixture(scope="module")
def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return name
    pytest.skip("no Chromium (apt-get install chromium)")


def _browse(chromium: str, url: str, profile, *output: str) -> subprocess.CompletedProcess:
    """Chromium, headless, on ``url`` until the page has settled (15 s of the page's time), with
    ``--no-sandbox`` because Chromium refuses to run its sandbox as root (as tests here do)."""
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
               "--virtual-time-budget=15000", *output, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)


def test_the_experiment_opens_on_a_runs_table_with_the_axes_and_the_verdict_as_columns(
    chromium, tracking_server, tmp_path
):
    grid = run_medexp(*GRID, "tracking=server", f"tracking.uri={tracking_server}", f"paths.cache_dir={tmp_path}",
                      f"hydra.sweep.dir={tmp_path / 'sweep'}", timeout=600)
    assert grid.returncode == 0, grid.stderr[-3000:]
    client = MlflowClient(tracking_server)
    experiment = client.get_experiment_by_name("medexp")
    cells = [run for run in client.search_runs([experiment.experiment_id]) if "medexp.cell_key" in run.data.tags]
    assert sorted(run.data.metrics["flag"] for run in cells) == [0.0, 1.0]

    url = runs_table_url(tracking_server, experiment.experiment_id)
    table = table_cells(_browse(chromium, url, tmp_path / "profile", "--dump-dom").stdout)
    for run in cells:
        # A cell's row, listed under its detector's group: the runs table, and not nested out of sight.
        row = table[f"tag.{GROUP_BY_TAG}.{run.data.tags[GROUP_BY_TAG]}.{run.info.run_id}"]
        assert row["attributes.`Run Name`"] == run.data.tags["medexp.cell_key"]
        for tag in COMPARED_TAGS:
            assert row[f"tags.`{tag}`"] == run.data.tags[tag]
        for metric in COMPARED_METRICS:
            assert float(row[f"metrics.`{metric}`"]) == run.data.metrics[metric]

    screenshot = tmp_path / "runs-table.png"
    _browse(chromium, url, tmp_path / "profile", f"--screenshot={screenshot}")
    png = screenshot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == WINDOW
