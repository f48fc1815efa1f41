"""How each launched job ended, as its launcher saw it: written by medexp's Slurm and Ray launchers
into ``<sweep dir>/medexp_job_ends.json``, read by the sweep's summary beside the cells' own
outcome files.

A cell reports its own end (its outcome file); a job that ended without a result (cancelled, out
of time, its node lost, a Ray worker gone) says nothing more itself, and only the launcher knows
what became of it: the Slurm job id and final state, or Ray's error, and whether the engine
confirmed the end (a job cancelled that Slurm still shows running, or that Slurm did not answer
for, is not over). A launcher hands such a job to
Hydra as :class:`EndedWithoutResult` (status FAILED, its return value the :class:`JobEnd`), which
the sweeper does not raise, so the other jobs are waited for and the summary counts it.
"""

# No ``from __future__ import annotations``: Hydra's plugin scan executes this module before it
# is in sys.modules, where dataclasses cannot resolve string annotations.
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict

from hydra.core.utils import JobReturn, JobStatus

from medexp.kernel.atomic import atomic_write_bytes

ENDS_FILE = "medexp_job_ends.json"  # in the sweep dir: {job number: JobEnd as a dict}


@dataclass(frozen=True)
class JobEnd:
    """One launched job's end as its launcher saw it."""

    num: int  # the sweep's job number
    job_id: str  # Slurm's "<array job>_<task>" or Ray's task id
    state: str  # Slurm's last state (COMPLETED, CANCELLED, TIMEOUT, NODE_FAIL, ...) or RAY_FINISHED / RAY_FAILED
    result: bool  # whether the job handed back its task's return
    detail: str = ""  # why it has no result, or how it was stopped
    # Whether the launcher saw the job's end from the engine (Slurm showed it in an end state, or no
    # longer knew it): a job given up on and cancelled without that may still run, and its cell's
    # run is left RUNNING (not ended KILLED) until a later command sees it stale.
    confirmed: bool = True
    reason: str = ""  # Slurm's pending reason (squeue %r) the job was given up for (JobHeldAdmin, ...)

    def describe(self) -> str:
        """One phrase for the summary's lines: the job id and why it has no result (or its state)."""
        return f"{self.job_id} {self.detail or self.state}"


@dataclass
class EndedWithoutResult(JobReturn):
    """A job that ended without its task's return value. Its status is FAILED; its return value is
    the :class:`JobEnd`, given back instead of raised (Hydra's sweepers raise a failed job's
    return value, which would stop the sweep before the jobs still running report)."""

    @property
    def return_value(self) -> JobEnd:
        return self._return_value


def ended_without_result(overrides, end: JobEnd) -> EndedWithoutResult:
    return EndedWithoutResult(overrides=list(overrides), status=JobStatus.FAILED, _return_value=end)


def record_job_ends(sweep_dir: Path, ends: Dict[int, JobEnd]) -> None:
    """Add ``ends`` to the sweep dir's record (a sweep launches its batches one after another)."""
    recorded = read_job_ends(sweep_dir)
    recorded.update(ends)
    text = json.dumps({str(num): asdict(end) for num, end in sorted(recorded.items())}, indent=1)
    atomic_write_bytes(Path(sweep_dir) / ENDS_FILE, text.encode("utf-8"))


def read_job_ends(sweep_dir: Path) -> Dict[int, JobEnd]:
    """The recorded ends by job number (empty when no launcher of medexp's recorded any)."""
    path = Path(sweep_dir) / ENDS_FILE
    if not path.is_file():
        return {}
    return {int(num): JobEnd(**fields) for num, fields in json.loads(path.read_text(encoding="utf-8")).items()}
