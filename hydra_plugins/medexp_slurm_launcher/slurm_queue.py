"""What Slurm says of a sweep's jobs, and waiting for them with a bound.

submitit waits for a job (``Job.results``) until its result file appears or ``sacct`` reports it
done. Without accounting (no slurmdbd) every ``sacct`` call fails ("Slurm accounting storage is
disabled"), the state stays UNKNOWN, which submitit counts as not done, and a job that ends
without a result file (``scancel``, a node lost, a time limit) is waited for forever. With
accounting, submitit polls every ten minutes at most and then raises for such a job, which
stops the whole sweep while its other jobs still run.

:func:`wait_for_jobs` asks the controller (``squeue``, which holds every job until ``MinJobAge``
after its end) and, for a job it no longer holds, the accounting database (``sacct``, when there
is one). A job counts as ended without a result once, for ``lost_after_s``, it has had no result
file while Slurm shows it in no active state (ended, or known to neither); or once Slurm has not
answered for ``silent_after_s``. Waiting on a job Slurm still queues or runs has no bound of
ours: the queue and the job's ``--time`` bound it.
"""

# No ``from __future__ import annotations``: Hydra's plugin scan executes this module before it
# is in sys.modules.
import logging
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

log = logging.getLogger(__name__)

# Job states in which a job is queued, runs or is on its way to run again; any other state (or
# none: the job is unknown) is an end, once it lasts (a node failure or preemption passes through
# NODE_FAIL or PREEMPTED on its way to a requeue).
ACTIVE = frozenset({
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING",
    "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD", "SPECIAL_EXIT",
})


class SlurmQueue:
    """The state of jobs by id (``<array job>_<task>`` or a plain job id), from ``squeue`` and,
    for jobs the controller no longer holds, ``sacct``."""

    def __init__(self, run: Callable[..., subprocess.CompletedProcess] = subprocess.run, timeout_s: float = 60.0):
        self._run = run
        self._timeout_s = timeout_s

    def states(self, job_ids: Sequence[str]) -> Optional[Dict[str, str]]:
        """State by job id of the jobs Slurm knows among ``job_ids``; None when the controller did
        not answer (down, or too slow)."""
        arrays = sorted({job_id.split("_")[0] for job_id in job_ids})
        held = self._ask(["squeue", "--noheader", "--array", "--states=all", "--format=%i|%T", f"--jobs={','.join(arrays)}"])
        if held is None:
            return None
        states = _parse(held)
        missing = [job_id for job_id in job_ids if job_id not in states]
        if missing:
            accounted = self._ask(["sacct", "--noheader", "--parsable2", "--allocations", "--format=JobID,State",
                                   f"--jobs={','.join(sorted({job_id.split('_')[0] for job_id in missing}))}"],
                                  quiet=True)
            for job_id, state in _parse(accounted or "").items():
                states.setdefault(job_id, state)
        return states

    def cancel(self, job_ids: Sequence[str]) -> None:
        """``scancel`` the jobs: Slurm sends SIGTERM to each running one (SIGKILL after ``KillWait``)."""
        self._ask(["scancel", *sorted(set(job_ids))])

    def _ask(self, command: List[str], quiet: bool = False) -> Optional[str]:
        """The command's output; "" when it names no job Slurm knows; None when it failed."""
        try:
            done = self._run(command, capture_output=True, text=True, timeout=self._timeout_s)
        except (OSError, subprocess.TimeoutExpired) as error:
            log.warning("%s did not answer: %s", command[0], error)
            return None
        if done.returncode == 0:
            return done.stdout
        if "Invalid job id" in done.stderr:  # squeue: the controller no longer holds the job
            return ""
        if not quiet:  # sacct fails on every call without accounting: expected, not worth a warning
            log.warning("%s failed (%d): %s", command[0], done.returncode, done.stderr.strip()[:300])
        return None


def _parse(output: str) -> Dict[str, str]:
    """``id|STATE`` lines to {id: STATE}. sacct writes "CANCELLED by <uid>": the first word counts;
    its ranges of pending array tasks ("12_[3-5]") are left out (squeue lists those one by one)."""
    states = {}
    for line in output.splitlines():
        job_id, _, state = line.strip().partition("|")
        if job_id and "[" not in job_id and "." not in job_id and state:
            states[job_id] = state.split()[0].rstrip("+")
    return states


@dataclass
class JobWait:
    """Where one job stands while :func:`wait_for_jobs` waits for it."""

    job_id: str
    state: str = "SUBMITTED"  # the last state Slurm gave (or SUBMITTED before it gave one)
    result: bool = False  # its result file is there
    quiet_since: Optional[float] = None  # since when it has had no result and no active state
    ended: str = ""  # why it counts as ended without a result ("" while it is waited for, or has a result)
    seen: List[str] = field(default_factory=list)  # the states it went through, in order

    @property
    def done(self) -> bool:
        return self.result or bool(self.ended)


def wait_for_jobs(
    jobs: Sequence[object],
    queue: SlurmQueue,
    has_result: Callable[[object], bool],
    *,
    poll_s: float = 5.0,
    lost_after_s: float = 30.0,
    silent_after_s: float = 600.0,
    give_up_after_s: Optional[float] = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> List[JobWait]:
    """Wait until every job (submitit jobs: their ``job_id``) has a result file or counts as ended
    without one (module docstring); returns each job's :class:`JobWait`, in order.
    ``give_up_after_s``: a bound on the whole wait (after ``scancel``), past which the jobs still
    waited for count as ended in the state they are in."""
    waits = [JobWait(str(getattr(job, "job_id"))) for job in jobs]
    started = clock()
    while True:
        now = clock()
        for job, wait in zip(jobs, waits):
            if not wait.done and has_result(job):
                wait.result = True
        open_waits = [wait for wait in waits if not wait.done]
        if not open_waits:
            return waits
        states = queue.states([wait.job_id for wait in open_waits])
        for wait in open_waits:
            state = None if states is None else states.get(wait.job_id)
            if state is not None:
                wait.state = state
                if not wait.seen or wait.seen[-1] != state:
                    wait.seen.append(state)
            if state in ACTIVE:
                wait.quiet_since = None
                continue
            if wait.quiet_since is None:
                wait.quiet_since = now
            bound = silent_after_s if states is None else lost_after_s
            if now - wait.quiet_since >= bound:
                wait.ended = _why_ended(wait, state, states is None, bound)
        if give_up_after_s is not None and now - started >= give_up_after_s:
            for wait in waits:
                if not wait.done:
                    wait.ended = f"still {wait.state} {give_up_after_s:.0f} s after the wait began"
        if all(wait.done for wait in waits):
            return waits
        sleep(poll_s)


def _why_ended(wait: JobWait, state: Optional[str], unanswered: bool, bound: float) -> str:
    if unanswered:
        return f"Slurm did not answer for {bound:.0f} s (last state {wait.state})"
    went = " -> ".join(wait.seen) or "never seen"
    if state is None:
        return f"left the queue without a result ({went}; unknown to squeue and sacct for {bound:.0f} s)"
    return f"ended {state} without a result ({went})"
