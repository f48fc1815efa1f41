"""What Slurm says of a sweep's jobs, waiting for them with bounds, and a job's end confirmed.

submitit waits for a job (``Job.results``) until its result file appears or ``sacct`` reports it
done. Without accounting (no slurmdbd) every ``sacct`` call fails ("Slurm accounting storage is
disabled"), the state stays UNKNOWN, which submitit counts as not done, and a job that ends
without a result file (``scancel``, a node lost, a time limit) is waited for forever. With
accounting, submitit polls every ten minutes at most and then raises for such a job, which
stops the whole sweep while its other jobs still run.

:func:`wait_for_jobs` asks the controller (``squeue``, which holds every job until ``MinJobAge``
after its end, with its pending reason, ``%r``) and, for a job it no longer holds, the accounting
database (``sacct``, when there is one). A job's wait ends in one of three ways:

* its result file appears;
* Slurm shows it ended without one: an end state (CANCELLED, TIMEOUT, NODE_FAIL, ...) or no
  state at all (known to neither) for ``lost_s``, or COMPLETED for ``result_grace_s`` (a result
  file written at the end may take that long to show on a network filesystem). Slurm said so: the
  end is confirmed;
* the wait gives up on it: held (JobHeldAdmin, JobHeldUser) for ``held_s``, pending for a reason
  it cannot run with as submitted (:data:`UNRUNNABLE_REASONS`) for ``unrunnable_s``, pending on an
  aggregate limit while none of the sweep's jobs runs for ``limit_s``, COMPLETING for
  ``completing_grace_s``, or Slurm not answering for ``silent_s``. Such a job may still run:
  :func:`confirm_ends` cancels it (``scancel``) and waits, up to ``cancel_wait_s``, for Slurm to
  show its end; until Slurm does, its end is unconfirmed and its cell's run is left RUNNING.

A job queued for resources or priority, or running within its ``--time``, is waited for without a
bound of ours: the queue and the job's time limit bound it.
"""

# No ``from __future__ import annotations``: Hydra's plugin scan executes this module before it
# is in sys.modules.
import logging
import math
import shutil
import subprocess
import time
from dataclasses import dataclass, field, fields
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

log = logging.getLogger(__name__)

# Job states in which a job is queued, runs or is on its way to run again; any other state (or
# none: the job is unknown) is an end, once it lasts (a node failure or preemption passes through
# NODE_FAIL or PREEMPTED on its way to a requeue).
ACTIVE = frozenset({
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING",
    "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD", "SPECIAL_EXIT",
})
# States in which a job holds its allocation: while one of the sweep's jobs is in one, a sibling
# pending on an aggregate limit is waiting for it, not for ever.
HOLDING = frozenset({"CONFIGURING", "RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "RESIZING"})

# The client commands the launcher needs on the driver's PATH: sbatch (submitit submits with it, and
# will not start without srun, which each job runs), squeue, sacct, scancel.
COMMANDS = ("sbatch", "srun", "squeue", "sacct", "scancel")

# Pending reasons (squeue %r; https://slurm.schedmd.com/job_reason_codes.html) of a held job: it
# runs only once someone releases it.
HELD_REASONS = frozenset({"JobHeldAdmin", "JobHeldUser"})
# Pending reasons with which the job cannot start as submitted, unless an administrator changes the
# partition, the nodes, the QOS or the account; also every QOSMax*/AssocMax* limit per job or per
# node and every QOSMin* minimum (:func:`pending_kind`).
UNRUNNABLE_REASONS = frozenset({
    "PartitionTimeLimit", "PartitionNodeLimit", "PartitionConfig", "PartitionDown", "PartitionInactive",
    "ReqNodeNotAvail", "NodeDown", "FrontEndDown", "BadConstraints", "InvalidAccount", "InvalidQOS",
    "AccountNotAllowed", "QOSNotAllowed", "DependencyNeverSatisfied", "InvalidReservation",
})
# Pending reasons of an aggregate limit (of the association, the QOS, the user or the account): it
# clears as other jobs end. JobArrayTaskLimit, the sweep's own array_parallelism, is not one.
LIMIT_PREFIXES = ("AssocGrp", "QOSGrp", "AssocMax", "QOSMax", "MaxCpuPerAccount", "MaxGRESPerAccount",
                  "MaxJobsPerAccount", "MaxMemoryPerAccount", "MaxNodePerAccount", "MaxSubmitJobsPerAccount")
LIMIT_REASONS = frozenset({"QOSJobLimit", "QOSResourceLimit", "QOSTimeLimit", "QOSUsageThreshold",
                           "AccountingPolicy"})


class SlurmCommandMissing(RuntimeError):
    """A Slurm client command is not on the driving process's PATH."""


def missing_commands(which: Callable[[str], Optional[str]] = shutil.which) -> List[str]:
    """The commands of :data:`COMMANDS` not on PATH."""
    return [command for command in COMMANDS if which(command) is None]


def pending_kind(reason: str) -> Optional[str]:
    """"held", "unrunnable" or "limit" for a pending reason the wait bounds; None for the others
    (Priority, Resources, BeginTime, Dependency, JobArrayTaskLimit, ...), which the queue resolves.
    squeue writes some reasons with details ("ReqNodeNotAvail, UnavailableNodes:vm"): the first
    word counts."""
    word = reason.split(",")[0].strip()
    if word in HELD_REASONS:
        return "held"
    request_limit = word.startswith(("QOSMax", "AssocMax")) and ("PerJob" in word or "PerNode" in word)
    if word in UNRUNNABLE_REASONS or request_limit or word.startswith("QOSMin"):
        return "unrunnable"
    if word in LIMIT_REASONS or word.startswith(LIMIT_PREFIXES) or "PerUser" in word:
        return "limit"
    return None


@dataclass
class WaitBounds:
    """``hydra.launcher.wait``: how the Slurm launcher waits for its jobs, in seconds (module
    docstring). Checked when the launcher is made."""

    poll_s: float = 5.0  # between two looks at the jobs' result files and at squeue
    lost_s: float = 30.0  # an end state (or no state) without a result file, before the job counts as ended
    result_grace_s: float = 120.0  # COMPLETED without a result file, before the job counts as ended
    completing_grace_s: float = 300.0  # COMPLETING, before the wait gives up on the job
    held_s: float = 3600.0  # pending JobHeldAdmin/JobHeldUser, before the wait gives up on the job
    unrunnable_s: float = 600.0  # pending for a reason it cannot run with (PartitionTimeLimit, ...)
    limit_s: float = 3600.0  # pending on an aggregate limit while none of the sweep's jobs runs
    silent_s: float = 600.0  # Slurm not answering, before the wait gives up on the jobs still waited for
    cancel_wait_s: float = 90.0  # after scancel, for Slurm to show the job ended (its KillWait is 30 s)

    def __post_init__(self) -> None:
        for bound in fields(self):
            value = getattr(self, bound.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"hydra.launcher.wait.{bound.name} must be a number of seconds, got {value!r}")
            if value < 0 or (bound.name == "poll_s" and value == 0):
                least = "> 0" if bound.name == "poll_s" else ">= 0"
                raise ValueError(f"hydra.launcher.wait.{bound.name} must be {least} seconds, got {value}")


@dataclass(frozen=True)
class JobState:
    """What Slurm says of one job: its state and, while it pends, why (squeue ``%r``)."""

    state: str
    reason: str = ""


class SlurmQueue:
    """The state of jobs by id (``<array job>_<task>`` or a plain job id), from ``squeue`` and,
    for jobs the controller no longer holds, ``sacct``; and ``scancel``."""

    def __init__(self, run: Callable[..., subprocess.CompletedProcess] = subprocess.run, timeout_s: float = 60.0):
        self._run = run
        self._timeout_s = timeout_s

    def states(self, job_ids: Sequence[str]) -> Optional[Dict[str, JobState]]:
        """What Slurm says of the jobs it knows among ``job_ids``; None when the controller did
        not answer (down, or too slow)."""
        arrays = sorted({job_id.split("_")[0] for job_id in job_ids})
        held = self._ask(["squeue", "--noheader", "--array", "--states=all", "--format=%i|%T|%r",
                          f"--jobs={','.join(arrays)}"])
        if held is None:
            return None
        states = _parse(held)
        for job_id in job_ids:  # tasks not split out (all cancelled while pending) share the array's record
            array = job_id.split("_")[0]
            if job_id not in states and job_id != array and array in states:
                states[job_id] = states[array]
        missing = [job_id for job_id in job_ids if job_id not in states]
        if missing:
            accounted = self._ask(["sacct", "--noheader", "--parsable2", "--allocations", "--format=JobID,State",
                                   f"--jobs={','.join(sorted({job_id.split('_')[0] for job_id in missing}))}"],
                                  quiet=True)
            for job_id, state in _parse(accounted or "").items():
                states.setdefault(job_id, state)
        return states

    def cancel(self, job_ids: Sequence[str]) -> bool:
        """``scancel`` the jobs (Slurm sends SIGTERM to each running one, SIGKILL after
        ``KillWait``); whether Slurm took the request."""
        return self._ask(["scancel", *sorted(set(job_ids))]) is not None

    def _ask(self, command: List[str], quiet: bool = False) -> Optional[str]:
        """The command's output; "" when it names no job Slurm knows; None when it failed."""
        try:
            done = self._run(command, capture_output=True, text=True, timeout=self._timeout_s)
        except FileNotFoundError:  # not an unanswering Slurm: no Slurm here at all
            raise SlurmCommandMissing(f"{command[0]} not found on PATH: the Slurm launcher cannot watch its jobs") \
                from None
        except (OSError, subprocess.TimeoutExpired) as error:
            log.warning("%s did not answer: %s", command[0], error)
            return None
        if done.returncode == 0:
            return done.stdout
        if "Invalid job id" in done.stderr:  # squeue, scancel: the controller no longer holds the job
            return ""
        if not quiet:  # sacct fails on every call without accounting: expected, not worth a warning
            log.warning("%s failed (%d): %s", command[0], done.returncode, done.stderr.strip()[:300])
        return None


def _parse(output: str) -> Dict[str, JobState]:
    """``id|STATE[|reason]`` lines to {id: JobState}. sacct writes "CANCELLED by <uid>": the first
    word counts; a range of array tasks ("12_[3-5,8]", "12_[0-9%2]") stands for each of them;
    job steps ("12_3.batch") are left out; squeue's reason "None" is no reason."""
    states = {}
    for line in output.splitlines():
        job_id, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if job_id and "." not in job_id and state:
            for task_id in _task_ids(job_id):
                states[task_id] = JobState(state.split()[0].rstrip("+"), "" if reason == "None" else reason)
    return states


def _task_ids(job_id: str) -> List[str]:
    """The ids a job id names: itself, or each task of a range ``<array>_[<ranges>[%<limit>]]``."""
    array, bracket, ranges = job_id.partition("_[")
    if not bracket:
        return [job_id]
    ids = []
    for part in ranges.rstrip("]").split("%")[0].split(","):
        first, _, last = part.partition("-")
        ids += [f"{array}_{task}" for task in range(int(first), int(last or first) + 1)]
    return ids


@dataclass
class JobWait:
    """Where one job stands while :func:`wait_for_jobs` waits for it and :func:`confirm_ends`
    confirms its end."""

    job_id: str
    state: str = "SUBMITTED"  # the last state Slurm gave (or SUBMITTED before it gave one)
    result: bool = False  # its result file is there
    ended: str = ""  # why it counts as ended without a result, as Slurm showed it ("" otherwise)
    given_up: str = ""  # why the wait gave up on it: it is cancelled and its end is to be confirmed
    given_up_for: str = ""  # the pending reason it was given up for (JobHeldAdmin, PartitionTimeLimit, ...)
    confirmed: bool = False  # Slurm showed the job ended (for a job with a result: in its final state)
    seen: List[str] = field(default_factory=list)  # the states it went through, in order
    clock: Tuple[str, float] = ("", 0.0)  # what the job's current bound counts, and since when

    @property
    def done(self) -> bool:
        return self.result or bool(self.ended or self.given_up)

    def observe(self, answer: Optional[JobState]) -> None:
        """Take Slurm's word on the job (None: Slurm does not know it)."""
        if answer is None:
            return
        self.state = answer.state
        if not self.seen or self.seen[-1] != answer.state:
            self.seen.append(answer.state)

    def counts(self, what: str, now: float) -> float:
        """Seconds since the job came to be in situation ``what`` ("" for none)."""
        if self.clock[0] != what:
            self.clock = (what, now)
        return now - self.clock[1]


def wait_for_jobs(
    jobs: Sequence[object],
    queue: SlurmQueue,
    has_result: Callable[[object], bool],
    bounds: WaitBounds,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> List[JobWait]:
    """Wait until every job (submitit jobs: their ``job_id``) has a result file, has ended without
    one, or has been given up on (module docstring); returns each job's :class:`JobWait`, in order."""
    waits = [JobWait(str(getattr(job, "job_id"))) for job in jobs]
    silent_since: Optional[float] = None
    while True:
        now = clock()
        for job, wait in zip(jobs, waits):
            if not wait.done and has_result(job):
                wait.result = True
        open_waits = [wait for wait in waits if not wait.done]
        if not open_waits:
            return waits
        states = queue.states([wait.job_id for wait in open_waits])
        if states is None:
            silent_since = now if silent_since is None else silent_since
            if now - silent_since >= bounds.silent_s:
                for wait in open_waits:
                    wait.given_up = f"Slurm did not answer for {bounds.silent_s:g} s (last state {wait.state})"
        else:
            silent_since = None
            sweep_holds = any(answer.state in HOLDING for answer in states.values())
            for wait in open_waits:
                wait.observe(states.get(wait.job_id))
                _bound(wait, states.get(wait.job_id), bounds, now, sweep_holds)
        if all(wait.done for wait in waits):
            return waits
        sleep(bounds.poll_s)


def _bound(wait: JobWait, answer: Optional[JobState], bounds: WaitBounds, now: float, sweep_holds: bool) -> None:
    """Start, go on with or stop the clock of the job's situation; end or give up its wait once
    the situation has lasted its bound."""
    went = " -> ".join(wait.seen) or "never seen"
    if answer is None:
        if wait.counts("unknown", now) >= bounds.lost_s:
            wait.ended = (f"left the queue without a result ({went}; unknown to squeue and sacct for "
                          f"{bounds.lost_s:g} s)")
            wait.confirmed = True
    elif answer.state == "COMPLETED":
        if wait.counts("completed", now) >= bounds.result_grace_s:
            wait.ended = (f"ended COMPLETED without a result ({went}; no result file {bounds.result_grace_s:g} s "
                          "after its end)")
            wait.confirmed = True
    elif answer.state not in ACTIVE:
        if wait.counts(f"ended {answer.state}", now) >= bounds.lost_s:
            wait.ended = f"ended {answer.state} without a result ({went})"
            wait.confirmed = True
    elif answer.state == "COMPLETING":
        if wait.counts("completing", now) >= bounds.completing_grace_s:
            wait.given_up = f"still COMPLETING {bounds.completing_grace_s:g} s after it began to end"
    elif answer.state not in HOLDING and pending_kind(answer.reason) is not None:
        kind = pending_kind(answer.reason)
        if kind == "limit" and sweep_holds:  # the limit clears as the sweep's running jobs end
            wait.counts("", now)
            return
        bound = {"held": bounds.held_s, "unrunnable": bounds.unrunnable_s, "limit": bounds.limit_s}[kind]
        if wait.counts(f"pending {answer.reason}", now) >= bound:
            wait.given_up_for = answer.reason
            wait.given_up = {"held": f"held ({answer.reason}) for {bound:g} s",
                             "unrunnable": f"cannot run as submitted ({answer.reason}) for {bound:g} s",
                             "limit": f"pending on a limit ({answer.reason}) for {bound:g} s while no job "
                                      "of the sweep ran"}[kind]
    else:
        wait.counts("", now)


def confirm_ends(
    waits: Sequence[JobWait],
    queue: SlurmQueue,
    bounds: WaitBounds,
    cancel: Set[str],
    *,
    others_s: Optional[float] = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """``scancel`` the jobs named in ``cancel`` (again at each look until Slurm takes the
    request), then look, every ``poll_s`` (a second at most: the end is near), until Slurm shows
    each job of ``waits`` not yet confirmed in an end state, or no longer knows it: up to
    ``cancel_wait_s`` for a cancelled job, ``others_s`` (``completing_grace_s`` unless given) for
    the others, whose final state is wanted (a job writes its result, then ends). Each wait's
    ``state`` is then its last state, ``confirmed`` whether Slurm showed its end."""
    started = clock()
    poll_s = min(bounds.poll_s, 1.0)
    to_cancel = {wait.job_id for wait in waits if wait.job_id in cancel and not wait.confirmed}
    others_s = bounds.completing_grace_s if others_s is None else others_s

    def open_waits(now: float) -> List[JobWait]:
        return [wait for wait in waits if not wait.confirmed
                and now - started < (bounds.cancel_wait_s if wait.job_id in cancel else others_s)]

    while True:
        if to_cancel and queue.cancel(sorted(to_cancel)):
            to_cancel = set()
        pending = open_waits(clock())
        if not pending:
            return
        states = queue.states([wait.job_id for wait in pending])
        for wait in pending:
            answer = None if states is None else states.get(wait.job_id)
            wait.observe(answer)
            wait.confirmed = states is not None and (answer is None or answer.state not in ACTIVE)
        if not open_waits(clock()):
            return
        sleep(poll_s)
