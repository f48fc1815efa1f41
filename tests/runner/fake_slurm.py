"""A scripted Slurm for the launcher's tests: ``sbatch``, ``squeue``, ``sacct`` and ``scancel`` (and
an ``srun`` that only fails) as executables on a temporary PATH, so the launcher and submitit run
their real subprocess calls.

A test describes the cluster (:class:`FakeSlurm`): for each task of the one job array sbatch
submits, the states it goes through, each for a number of squeue calls ("polls"), with its
pending reason; what it goes through once ``scancel``\\ ed; the poll at which its result file
appears (copied from a file the test wrote); the polls during which the controller does not
answer (squeue and scancel fail as Slurm's do); whether there is accounting (sacct answers with
each task's last state, or fails as without slurmdbd); and a poll at which the driving process
gets SIGINT. Every call is logged. A state of "" is a task the controller no longer holds
(``MinJobAge`` passed): squeue leaves it out, sacct still knows it. Tasks cancelled while
pending are listed as one record with the array's id, as slurm-wlm 22.05 lists them.

The commands run this file with ``python -S``: below :class:`FakeSlurm` it uses the standard
library only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

ARRAY = "7"  # the job id the fake sbatch gives the array
COMMANDS = ("sbatch", "srun", "squeue", "sacct", "scancel")  # srun: submitit wants it on PATH, never runs it
FOREVER = None  # a step's number of polls: it lasts


class FakeSlurm:
    """The scripted cluster in ``folder``: ``install()`` puts its commands first on PATH."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.bin = self.folder / "bin"
        self.cluster = {"jobs": {}, "silent": [], "accounting": False, "interrupt_at": None}

    def job(self, task: int, *steps, on_cancel=(("CANCELLED", "", FOREVER),), result_at=None, result_file=None,
            result_to=None) -> "FakeSlurm":
        """Task ``task``: ``steps`` as (state, reason, polls); after scancel, ``on_cancel``; its
        result file ``result_file`` copied to ``result_to`` (its ``{job_id}`` filled in) at poll
        ``result_at``. Submitted alone (submitit submits a one-job sweep without --array), task 0
        is job ``7``, otherwise ``7_<task>``."""
        self.cluster["jobs"][str(task)] = {
            "states": [list(step) for step in steps], "on_cancel": [list(step) for step in on_cancel],
            "result_at": result_at, "result_file": str(result_file) if result_file else None,
            "result_to": str(result_to) if result_to else None}
        return self

    def silent(self, first: int, last: float | None = None) -> "FakeSlurm":
        """The controller does not answer from poll ``first`` to ``last`` (for ever when None)."""
        self.cluster["silent"].append([first, last])
        return self

    def install(self, commands=COMMANDS, alone: bool = False) -> str:
        """Write the cluster and the commands (only ``commands``); the PATH that finds them first,
        or (``alone``) only them: a host's own Slurm commands must not stand in for missing ones."""
        self.bin.mkdir(parents=True, exist_ok=True)
        (self.folder / "cluster.json").write_text(json.dumps(self.cluster))
        (self.folder / "state.json").write_text(json.dumps({"polls": 0, "cancelled": {}, "array": True}))
        for command in commands:
            path = self.bin / command
            path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{Path(__file__).resolve()}" "{self.folder}" '
                            f'{command} "$@"\n')
            path.chmod(0o755)
        return str(self.bin) if alone else f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"

    def calls(self, command: str | None = None) -> list[list[str]]:
        """The calls made so far (of ``command`` only, when given), each as its argv."""
        log = self.folder / "calls.log"
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return [call for call in calls if command is None or call[0] == command]


# ------------------------------------------------------------------ the commands (standard library only)


def _state_at(job: dict, poll: int, cancelled_at: int | None) -> tuple[str, str]:
    steps, count = job["states"], poll
    if cancelled_at is not None and poll > cancelled_at:
        steps, count = job["on_cancel"], poll - cancelled_at
    for state, reason, polls in steps:
        if polls is None or count <= polls:
            return state, reason
        count -= polls
    return steps[-1][0], steps[-1][1]


def _silent(cluster: dict, poll: int) -> bool:
    return any(first <= poll and (last is None or poll <= last) for first, last in cluster["silent"])


def _jobs(cluster: dict, state: dict) -> dict[str, dict]:
    """The jobs by Slurm id: ``7_<task>`` in an array, ``7`` for a job submitted alone."""
    return {(f"{ARRAY}_{task}" if state["array"] else ARRAY): job for task, job in cluster["jobs"].items()}


def _jobs_named(jobs: dict, argument: str) -> list[str]:
    """The job ids a --jobs list or a scancel argument names (an array id names its tasks)."""
    names = argument.split(",")
    return [job_id for job_id in jobs if job_id in names or job_id.split("_")[0] in names]


def main(folder: Path, command: str, args: list[str]) -> int:
    cluster = json.loads((folder / "cluster.json").read_text())
    state = json.loads((folder / "state.json").read_text())
    with open(folder / "calls.log", "a") as log:
        log.write(json.dumps([command, *args]) + "\n")
    poll, cancelled = state["polls"], state["cancelled"]
    if command == "sbatch":
        state["array"] = "--array" in Path(args[-1]).read_text()
        (folder / "state.json").write_text(json.dumps(state))
        print(f"Submitted batch job {ARRAY}")
        return 0
    jobs = _jobs(cluster, state)
    if command == "srun":
        print("srun: error: the fake Slurm runs no job", file=sys.stderr)
        return 1
    if command == "scancel":
        if _silent(cluster, poll):
            print(f"scancel: error: Kill job error on job id {args[0]}: Unable to contact slurm controller "
                  "(connect failure)", file=sys.stderr)
            return 1
        for job_id in [job_id for argument in args for job_id in _jobs_named(jobs, argument)]:
            if _state_at(jobs[job_id], poll, cancelled.get(job_id))[0]:
                cancelled.setdefault(job_id, poll)
        (folder / "state.json").write_text(json.dumps(state))
        return 0
    if command == "sacct":
        if not cluster["accounting"]:
            print("sacct: error: Slurm accounting storage is disabled", file=sys.stderr)
            return 1
        wanted = next(arg.split("=", 1)[1] for arg in args if arg.startswith("--jobs="))
        for job_id in _jobs_named(jobs, wanted):
            known = [_state_at(jobs[job_id], p, cancelled.get(job_id))[0] for p in range(1, poll + 1)]
            known = [s for s in known if s]
            if known:
                print(f"{job_id}|{known[-1]}{' by 0' if known[-1] == 'CANCELLED' else ''}")
        return 0
    # squeue: each call is a poll
    poll = state["polls"] = poll + 1
    (folder / "state.json").write_text(json.dumps(state))
    if cluster["interrupt_at"] == poll:
        os.kill(os.getppid(), signal.SIGINT)
    for job_id, job in jobs.items():
        target = Path(job["result_to"].format(job_id=job_id)) if job["result_to"] else None
        if job["result_at"] is not None and poll >= job["result_at"] and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(job["result_file"], f"{target}.tmp")
            os.replace(f"{target}.tmp", target)
    if _silent(cluster, poll):
        print("squeue: error: Unable to contact slurm controller (connect failure)", file=sys.stderr)
        return 1
    wanted = next(arg.split("=", 1)[1] for arg in args if arg.startswith("--jobs="))
    lines = []
    for job_id in _jobs_named(jobs, wanted):
        job_state, reason = _state_at(jobs[job_id], poll, cancelled.get(job_id))
        if job_id in cancelled and _state_at(jobs[job_id], cancelled[job_id], None)[0] == "PENDING" and job_id != ARRAY:
            job_id = ARRAY  # as slurm-wlm 22.05: tasks cancelled while pending are listed as the array's record
        if job_state and f"{job_id}|" not in "".join(lines):
            lines.append(f"{job_id}|{job_state}|{reason or 'None'}\n")
    if not lines:
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        return 1
    print("".join(lines), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3:]))
