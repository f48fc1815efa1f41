"""Cache entries filled by several processes at once (medexp.kernel.shards.sharing_work): every shard is
computed once, by whichever process reached it, and the entry is byte for byte what one process
writes; a task left alone still finishes the entry."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from medexp.kernel.shards import ShardedEntry, sharing_work
from tests.conftest import REPO

N_ITEMS, SHARD = 40, 4  # ten shards

# One process's part: fill the entry as task TASK of TASKS; each shard takes a moment, so the
# processes overlap; print how many shards this one computed.
WORKER = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from medexp.kernel.shards import ShardedEntry, sharing_work

    root, task, tasks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ids = [f"item-{{i}}" for i in range({n})]

    def compute(start, stop, path):
        time.sleep(0.3)
        with open(path, "wb") as out:  # np.save would add .npy to the temporary name
            np.save(out, np.arange(start, stop, dtype=np.int64) ** 2)

    def read(path, shard_ids):
        return np.load(path)

    with sharing_work(task, tasks) as share:
        shards = ShardedEntry(root, {{"table": "squares"}}, ids, {shard}, ".npy").load(compute, read, "squares")
    print(json.dumps({{"computed": share.computed, "total": int(np.concatenate(shards).sum())}}))
""").format(n=N_ITEMS, shard=SHARD)


def _start(root: Path, task: int, tasks: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WORKER, str(root), str(task), str(tasks)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _digests(root: Path) -> dict[str, str]:
    """The entry's complete marker: every shard's SHA-256, row count and item hash."""
    (entry,) = [path for path in root.iterdir() if path.is_dir()]
    marker = json.loads((entry / "complete.json").read_text())
    return {record["file"]: record["sha256"] for record in marker["shards"]} | {"ids": marker["ids_sha256"]}


def test_three_processes_compute_each_shard_once_and_write_what_one_process_writes(tmp_path):
    alone = _finish(_start(tmp_path / "alone", 0, 1))
    assert alone["computed"] == N_ITEMS // SHARD
    shared = [_start(tmp_path / "shared", task, 3) for task in range(3)]
    results = [_finish(process) for process in shared]
    assert sum(result["computed"] for result in results) == N_ITEMS // SHARD  # none computed twice
    assert all(result["computed"] >= 1 for result in results)  # each took part
    assert {result["total"] for result in results} == {alone["total"]}  # each read the whole entry
    assert _digests(tmp_path / "shared") == _digests(tmp_path / "alone")


def test_a_task_whose_partners_never_run_finishes_the_entry_alone(tmp_path):
    # Array tasks may run one after another (a throttled array): task 2 of 3 must not wait for 0 and 1.
    result = _finish(_start(tmp_path, 2, 3))
    assert result["computed"] == N_ITEMS // SHARD
    again = _finish(_start(tmp_path, 0, 3))  # a later task finds the entry complete
    assert again == {"computed": 0, "total": result["total"]}


def test_a_task_starts_at_its_own_share_of_the_shards(tmp_path):
    order = []

    def compute(start, stop, path):
        order.append(start)
        path.write_bytes(str(start).encode())

    entry = ShardedEntry(tmp_path, {"table": "t"}, [str(i) for i in range(10)], 1, ".txt")
    with sharing_work(1, 4):
        entry.load(compute, lambda path, ids: path.read_bytes(), "t")
    assert order == [2, 3, 4, 5, 6, 7, 8, 9, 0, 1]  # task 1 of 4 starts at shard 10 * 1 // 4


@pytest.mark.parametrize(("task", "tasks"), [(3, 3), (-1, 2)])
def test_a_task_outside_its_tasks_is_refused(task, tasks):
    with pytest.raises(ValueError, match="task must be in"):
        with sharing_work(task, tasks):
            pass
