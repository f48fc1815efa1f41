"""Each fault of a sweep on a Ray cluster, and its truth (issue 50; marker ``cluster``).

The two-node Ray of scripts/local_ray.sh (a head and a worker node, one CPU each, so two cells run
at once, one on each node) and a tracking server (``mlflow server`` on 127.0.0.1). Exch cells of
the demo through hydra/launcher=ray joining the cluster, interrupted mid-cell: SIGTERM to the
driving command, the tracking server lost, the worker node's raylet killed (last: it leaves the
cluster one node short). Each checks the exit status (non-zero exactly when a cell did not
finish), the summary, that no run is RUNNING once the command returns (for a dead server: once
the next command ran), and that a rerun completes the grid with every metric of an undisturbed
run, reusing what finished. About 15 min on 2 cores.
"""

from __future__ import annotations

import signal

import pytest

from tests.cluster.conftest import (BOTH, EXCH, alive, assert_nothing_running, cell_runs, environment,
                                    finished_metrics, fresh_cache, headline, interrupted, rerun_completes,
                                    server_lost_mid_sweep, sweep_runs)

pytestmark = pytest.mark.cluster


def on_ray(uri: str, tmp_path, experiment: str) -> list[str]:
    return ["hydra/launcher=ray", "hydra.launcher.ray.init.address=auto", "tracking=server", f"tracking.uri={uri}",
            f"tracking.experiment={experiment}", f"hydra.sweep.dir={tmp_path / 'sweep'}", f"paths.root={tmp_path}",
            "tracking.retry_backoff_s=0.2"]


def test_sigterm_to_the_driver_cancels_its_tasks_and_ends_every_run_killed(ray_cluster, tracking_server, reference,
                                                                           tmp_path):
    ray_env, _ = ray_cluster
    expected, models = reference
    cache = fresh_cache(tmp_path / "cache", models)
    env = environment(MEDEXP_CACHE=str(cache), **ray_env)
    args = ["-m", BOTH, *EXCH, *on_ray(tracking_server, tmp_path, "ray_sigterm")]
    code, out, _, after = interrupted(args, env, cache, 2, lambda sweep: sweep.send_signal(signal.SIGTERM))
    print(f"\nSIGTERM to the Ray driver: it exited {code} {after:.1f} s later: {headline(out)}")
    assert code == 143, out[-3000:]
    assert "medexp: sweep interrupted by SIGTERM; its runs end KILLED, rerun the same command to resume" in out
    assert ": 2 cells: 0 computed, 0 reused (tracked earlier), 0 failed, 2 killed" in headline(out)
    assert out.count("cancelled when the sweep was stopped") >= 2
    (parent,) = sweep_runs(tracking_server, "ray_sigterm")
    assert parent.info.status == "KILLED" and parent.data.tags["medexp.signal"] == "SIGTERM"
    for run in cell_runs(tracking_server, "ray_sigterm"):  # ray.cancel interrupts a task with KeyboardInterrupt
        assert run.info.status == "KILLED" and run.data.tags["medexp.signal"] == "SIGINT", run.data.tags
    assert_nothing_running(tracking_server, "ray_sigterm")

    rerun_completes(args, env, tracking_server, "ray_sigterm", expected, reused=0, computed=2)


def test_a_tracking_server_lost_mid_sweep_fails_the_cells_and_a_rerun_logs_their_kept_results(ray_cluster, reference,
                                                                                              tmp_path):
    ray_env, _ = ray_cluster
    expected, models = reference
    cache = fresh_cache(tmp_path / "cache", models)
    env = environment(MEDEXP_CACHE=str(cache), **ray_env)
    server_lost_mid_sweep(tmp_path, lambda uri: ["-m", BOTH, *EXCH, *on_ray(uri, tmp_path, "medexp")], env, cache,
                          expected)


def test_a_cell_whose_node_is_lost_is_retried_and_resumes_to_the_undisturbed_result(ray_cluster, tracking_server,
                                                                                    reference, tmp_path):
    ray_env, state = ray_cluster
    expected, models = reference
    cache = fresh_cache(tmp_path / "cache", models)
    env = environment(MEDEXP_CACHE=str(cache), **ray_env)
    args = ["-m", BOTH, *EXCH, *on_ray(tracking_server, tmp_path, "ray_node_lost")]
    # a cell on each node; SIGKILL to the worker node's raylet: the node is gone, and its worker with it
    code, out, before, after = interrupted(args, env, cache, 2, lambda sweep: worker_raylet(state).kill())
    print(f"\nthe worker node's raylet killed at {before:.0f} s; the command exited {code} {after:.0f} s later: "
          f"{headline(out)}")
    # Ray retries a task whose node died (max_retries, 3 by default): the cell runs again on the head
    # node and resumes from the shards its first attempt wrote.
    assert code == 0, out[-3000:]
    assert ": 2 cells: 2 computed, 0 reused (tracked earlier), 0 failed, 1 requeued or retried" in headline(out)
    runs = cell_runs(tracking_server, "ray_node_lost")
    assert sorted(run.info.status for run in runs) == ["FINISHED", "FINISHED", "KILLED"]
    (lost,) = [run for run in runs if run.info.status == "KILLED"]
    assert "left RUNNING" in lost.data.tags["medexp.error"] or "without ending the run" in lost.data.tags["medexp.error"]
    assert finished_metrics(tracking_server, "ray_node_lost") == expected
    assert_nothing_running(tracking_server, "ray_node_lost")

    rerun_completes(args, env, tracking_server, "ray_node_lost", expected, reused=2, computed=0)


def worker_raylet(state):
    """The worker node's raylet among the processes local_ray.sh started (its resource names it)."""
    import psutil

    for pid in (state / "ray.pids").read_text().split():
        if not alive(int(pid)):
            continue
        process = psutil.Process(int(pid))
        if process.name() == "raylet" and any("medexp_node_worker" in arg for arg in process.cmdline()):
            return process
    raise AssertionError("no raylet of the worker node")
