"""The grid on a two-node Ray cluster into a real MLflow tracking server (marker ``cluster``).

scripts/local_ray.sh starts a head and a worker node on this host (one CPU each) under a
temporary directory, on a port of its own; ``mlflow server`` runs on a free port with a sqlite
store. A four-cell sweep joins the cluster (``hydra.launcher.ray.init.address=auto``): every cell
is a Ray task, the cells land on both nodes, and each finds the demo cache through MEDEXP_CACHE,
which only the submitting shell has (the nodes were started without it). ``down`` stops every
process ``up`` started. About two minutes on 2 cores after the demo models are built.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, sweep_and_cells

pytestmark = pytest.mark.cluster


def test_grid_cells_run_on_both_ray_nodes_into_the_tracking_server(ray_cluster, tracking_server, tmp_path):
    ray_env, _ = ray_cluster
    cache = tmp_path / "cache"
    env = {**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}, **ray_env,
           "MEDEXP_CACHE": str(cache), "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "medexp", "-m", "model=demo_clean,demo_leaky", "control=none,order_hash",
         "detector=exch_rank", "detector.n_permutations=500", "bench.max_examples=120", "hydra/launcher=ray",
         "hydra.launcher.ray.init.address=auto", "tracking=server", f"tracking.uri={tracking_server}",
         f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
    print(f"sweep on Ray: {time.monotonic() - started:.0f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "FINISHED: 4 cells: 4 computed, 0 reused (tracked earlier), 0 failed" in done.stdout

    parent, cells = sweep_and_cells(tracking_server)
    assert parent.info.status == "FINISHED" and len(cells) == 4
    for run in cells:
        assert run.info.status == "FINISHED", run.data.tags.get("medexp.error")
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert int(run.data.tags["medexp.pid"]) != os.getpid()
    nodes = {run.data.tags["medexp.ray_node_id"] for run in cells}
    assert len(nodes) == 2, nodes  # one CPU per node and a CPU per cell: the cells used both nodes
    assert (cache / "scores").is_dir()  # MEDEXP_CACHE travelled from the submitting shell to the tasks


def test_a_cell_split_across_both_ray_nodes_fills_the_cache_one_process_fills(ray_cluster, tmp_path):
    ray_env, _ = ray_cluster
    cell = ["model=demo_leaky", "detector=exch", "detector.shards=8", "detector.permutations=20"]
    caches = {name: tmp_path / name for name in ("split", "alone")}
    models = tmp_path / "demo-models"
    models.mkdir()
    for cache in caches.values():  # score caches of their own, one set of demo models (built by the first run)
        cache.mkdir()
        (cache / "demo").symlink_to(models, target_is_directory=True)
    env = {**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}, **ray_env, "PYTHONPATH": str(REPO)}
    split = subprocess.run(
        [sys.executable, "-m", "medexp", "-m", *cell, "split.tasks=2", "split.task=0,1", "hydra/launcher=ray",
         "hydra.launcher.ray.init.address=auto", f"tracking.uri=sqlite:///{tmp_path / 'split.db'}",
         f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=REPO, env={**env, "MEDEXP_CACHE": str(caches["split"])}, capture_output=True, text=True, timeout=1500)
    assert split.returncode == 0, split.stdout[-3000:] + split.stderr[-3000:]
    assert "2 shared-work tasks (nothing tracked)" in split.stdout
    # Ray may print a task's line twice (each node's log monitor reads the one host's worker logs).
    counts = {task: int(n) for task, n in re.findall(r"task (\d) of 2: (\d+) cache shards computed here", split.stdout)}
    # Both tasks ran and between them computed every shard once. Each may not compute one: a task
    # whose worker starts late finds every shard taken (measured once in docs/clusters.md).
    shards = [path for path in caches["split"].glob("*/*/shard-*.json")]
    assert sorted(counts) == ["0", "1"] and sum(counts.values()) == len(shards) >= 8, (counts, len(shards))
    alone = subprocess.run(
        [sys.executable, "-m", "medexp", *cell, f"tracking.uri=sqlite:///{tmp_path / 'alone.db'}"],
        cwd=REPO, env={**env, "MEDEXP_CACHE": str(caches["alone"])}, capture_output=True, text=True, timeout=1500)
    assert alone.returncode == 0, alone.stderr[-3000:]

    def markers(cache: Path) -> dict[str, str]:
        return {path.parent.name: path.read_text() for path in (cache / "scores").glob("*/complete.json")}

    assert markers(caches["split"]) and markers(caches["split"]) == markers(caches["alone"])
