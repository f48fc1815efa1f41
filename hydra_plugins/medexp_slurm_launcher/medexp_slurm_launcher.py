"""``hydra/launcher=submitit_slurm``: hydra-submitit-launcher's Slurm launcher, waiting with a bound.

The published launcher submits the sweep as one job array and then waits on each job's
``results()``: a job that ends without a result file waits forever without accounting, and with
accounting raises, which ends the sweep while its other jobs still run (slurm_queue explains
where). This launcher submits the same array with the same options (the configuration is the
plugin's SlurmQueueConf, field for field), then waits with
:func:`~hydra_plugins.medexp_slurm_launcher.slurm_queue.wait_for_jobs`: every job ends with its
result or, after a bounded wait, as ended without one (:class:`EndedWithoutResult`), and every
job's end (its Slurm id and state) is recorded in the sweep dir for the summary.

When the driving process is stopped (SIGTERM, SIGINT, SIGHUP: the sweep's callback turns them
into exceptions), the array's jobs still queued or running are cancelled (``scancel``: each
running cell gets SIGTERM and ends its run KILLED), waited for up to ``cancel_wait_s``, and the
interruption goes on up.
"""

# No ``from __future__ import annotations``: Hydra's plugin scan executes this module before it
# is in sys.modules, where dataclasses cannot resolve string annotations.
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Sequence, Tuple

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf, SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import OmegaConf

from hydra_plugins.medexp_grid_sweeper.job_ends import JobEnd, ended_without_result, record_job_ends
from hydra_plugins.medexp_slurm_launcher.slurm_queue import JobWait, SlurmQueue, wait_for_jobs

log = logging.getLogger(__name__)


@dataclass
class MedexpSlurmQueueConf(SlurmQueueConf):
    """The published launcher's options, unchanged; only the class that runs them differs."""

    _target_: str = "hydra_plugins.medexp_slurm_launcher.medexp_slurm_launcher.MedexpSlurmLauncher"


class MedexpSlurmLauncher(SlurmLauncher):
    poll_s = 5.0  # between two looks at the jobs' result files and at squeue
    # A job without a result file that Slurm shows ended (or no longer knows) for this long has
    # ended without a result: long enough for a result file written just before the job ended to
    # appear on a shared filesystem (submitit itself waits 15 s).
    lost_after_s = 30.0
    silent_after_s = 600.0  # Slurm (squeue) not answering this long: the unfinished jobs count as lost
    cancel_wait_s = 90.0  # after scancel, for the cells to end their runs (Slurm's KillWait is 30 s)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Submit the jobs as hydra-submitit-launcher does, then wait for each with a bound."""
        import submitit

        assert self.config is not None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        executor = self._executor(submitit)
        log.info("Submitit 'slurm' sweep output dir : %s", sweep_dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        job_params: List[Any] = []
        for offset, overrides in enumerate(job_overrides):
            num = initial_job_idx + offset
            log.info("\t#%d : %s", num, " ".join(filter_overrides(overrides)))
            job_params.append((list(overrides), "hydra.sweep.dir", num, f"job_id_for_{num}", Singleton.get_state()))
        jobs = executor.map_array(self, *zip(*job_params))
        nums = [initial_job_idx + offset for offset in range(len(jobs))]
        queue = SlurmQueue()
        try:
            waits = wait_for_jobs(jobs, queue, _has_result, poll_s=self.poll_s, lost_after_s=self.lost_after_s,
                                  silent_after_s=self.silent_after_s)
        except BaseException:  # the driver was stopped: its jobs go with it
            self._cancel(jobs, nums, queue, sweep_dir)
            raise
        returns = [self._job_return(job, num, wait, overrides)
                   for job, num, wait, overrides in zip(jobs, nums, waits, job_overrides)]
        record_job_ends(sweep_dir, {num: end for num, (_, end) in zip(nums, returns)})
        return [job_return for job_return, _ in returns]

    def _executor(self, submitit: Any) -> Any:
        """submitit's executor with the launcher's options, exactly as hydra-submitit-launcher builds it."""
        init_keys = {"max_num_timeout", "submitit_folder"}
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, folder=self.params["submitit_folder"],
                                         **{f"{self._EXECUTOR}_max_num_timeout": self.params["max_num_timeout"]})
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{key if key in base else f"{self._EXECUTOR}_{key}": value
                                      for key, value in self.params.items() if key not in init_keys})
        return executor

    @staticmethod
    def _job_return(job: Any, num: int, wait: JobWait, overrides: Sequence[str]) -> Tuple[JobReturn, JobEnd]:
        if not wait.result:
            log.warning("job %d (Slurm %s) %s", num, wait.job_id, wait.ended)
            end = JobEnd(num, wait.job_id, wait.state, False, wait.ended)
            return ended_without_result(overrides, end), end
        try:
            job_return = job.results()[0]
        except Exception as error:  # its result file holds an error (submitit's own, around the cell)
            detail = str(error).strip().splitlines()
            end = JobEnd(num, wait.job_id, wait.state, False, f"its result is an error: {detail[-1] if detail else error}")
            log.warning("job %d (Slurm %s) %s", num, wait.job_id, end.detail)
            return ended_without_result(overrides, end), end
        return job_return, JobEnd(num, wait.job_id, "COMPLETED" if wait.state == "SUBMITTED" else wait.state, True)

    def _cancel(self, jobs: Sequence[Any], nums: Sequence[int], queue: SlurmQueue, sweep_dir: Path) -> None:
        """scancel the jobs without a result, wait (bounded) for them to leave the queue, record their ends."""
        unfinished = [(job, num) for job, num in zip(jobs, nums) if not _has_result(job)]
        ends = {num: JobEnd(num, str(job.job_id), "", True) for job, num in zip(jobs, nums)}
        if unfinished:
            ids = [str(job.job_id) for job, _ in unfinished]
            log.warning("the sweep was stopped: cancelling its Slurm jobs %s", " ".join(ids))
            queue.cancel(ids)
            # lost_after_s: a cancelled job leaves RUNNING and COMPLETING once its processes are gone
            waits = wait_for_jobs([job for job, _ in unfinished], queue, _has_result, poll_s=1.0, lost_after_s=2.0,
                                  silent_after_s=self.cancel_wait_s, give_up_after_s=self.cancel_wait_s)
            for (_, num), wait in zip(unfinished, waits):
                ends[num] = JobEnd(num, wait.job_id, wait.state, wait.result,
                                   "cancelled when the sweep was stopped" + ("" if wait.result else f"; {wait.ended}"))
        record_job_ends(sweep_dir, ends)


def _has_result(job: Any) -> bool:
    """Whether the job's result file is there (its folder touched first: on NFS a stat may lie)."""
    folder = job.paths.folder
    try:
        folder.chmod(folder.stat().st_mode)
    except OSError:
        pass
    return job.paths.result_pickle.exists()
