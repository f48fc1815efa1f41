"""``hydra/launcher=submitit_slurm``: hydra-submitit-launcher's Slurm launcher, waiting with bounds
and ending a job only when Slurm shows it ended.

The published launcher submits the sweep as one job array and then waits on each job's
``results()``: a job that ends without a result file waits forever without accounting, and with
accounting raises, which ends the sweep while its other jobs still run (slurm_queue explains
where). This launcher submits the same array with the same options (the plugin's SlurmQueueConf,
field for field), then waits with
:func:`~hydra_plugins.medexp_slurm_launcher.slurm_queue.wait_for_jobs` under the bounds of
``hydra.launcher.wait`` (:class:`~hydra_plugins.medexp_slurm_launcher.slurm_queue.WaitBounds`,
the config ``hydra/launcher/wait=slurm`` stored here): every job ends with its result, as ended
without one (:class:`EndedWithoutResult`), or given up on (held, unable to run, stuck
COMPLETING, Slurm silent), which is cancelled (``scancel``) and whose end Slurm must then show
(:func:`~hydra_plugins.medexp_slurm_launcher.slurm_queue.confirm_ends`). Every job's end (its
Slurm id, final state, pending reason, and whether Slurm confirmed it) is recorded in the sweep
dir for the summary; the sweep's end leaves the cell run of an unconfirmed job RUNNING.

The Slurm commands must be on the driving process's PATH: :meth:`MedexpSlurmLauncher.setup`
fails at once, naming the missing ones, before anything is submitted.

When the driving process is stopped (SIGTERM, SIGINT, SIGHUP: the sweep's callback turns them
into exceptions), the array's jobs still queued or running are cancelled (``scancel``: each
running cell gets SIGTERM and ends its run KILLED), their ends confirmed up to
``wait.cancel_wait_s``, and the interruption goes on up.
"""

# No ``from __future__ import annotations``: Hydra's plugin scan executes this module before it
# is in sys.modules, where dataclasses cannot resolve string annotations.
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Sequence, Tuple

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf, SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import OmegaConf

from hydra_plugins.medexp_grid_sweeper.job_ends import JobEnd, ended_without_result, record_job_ends
# By module, not by name: Hydra's plugin scan executes slurm_queue again after this module imported
# it, and the names bound here would then be its first classes, not those its functions make.
from hydra_plugins.medexp_slurm_launcher import slurm_queue

log = logging.getLogger(__name__)


@dataclass
class MedexpSlurmQueueConf(SlurmQueueConf):
    """The published launcher's options, unchanged; only the class that runs them differs. The
    wait's bounds come from the config group ``hydra/launcher/wait`` (its option ``slurm``,
    :class:`WaitBounds`), which ``conf/hydra/launcher/submitit_slurm.yaml`` names in its defaults:
    Hydra checks that file against the plugin's own schema of the same name, which has no ``wait``."""

    _target_: str = "hydra_plugins.medexp_slurm_launcher.medexp_slurm_launcher.MedexpSlurmLauncher"


ConfigStore.instance().store(group="hydra/launcher/wait", name="slurm", node=slurm_queue.WaitBounds, provider="medexp")


class MedexpSlurmLauncher(SlurmLauncher):
    def __init__(self, wait: Any = None, **params: Any) -> None:
        """``wait``: the bounds (``hydra.launcher.wait``), checked here; the rest: submitit's options."""
        given = OmegaConf.to_container(wait, resolve=True) if OmegaConf.is_config(wait) else dict(wait or {})
        self.bounds = slurm_queue.WaitBounds(**given)  # the wait's own error on a bad bound, before any job runs
        super().__init__(**params)

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        """Hydra's setup; without a Slurm command, one line saying which and exit status 2 (as a
        ``SystemExit``: Hydra prints any other exception with its traceback), before any job."""
        missing = slurm_queue.missing_commands()
        if missing:
            print(f"medexp: error: {', '.join(missing)} not found on PATH: hydra/launcher=submitit_slurm submits and "
                  "watches its jobs with Slurm's client commands, so run the sweep where they are (a login node, or "
                  "after `module load slurm`); no cell was launched", file=sys.stderr)
            raise SystemExit(2)
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Submit the jobs as hydra-submitit-launcher does, then wait for each with bounds,
        cancel those given up on, and confirm every end with Slurm."""
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
        queue = slurm_queue.SlurmQueue()
        try:
            waits = slurm_queue.wait_for_jobs(jobs, queue, _has_result, self.bounds)
        except BaseException:  # the driver was stopped: its jobs go with it
            self._cancel(jobs, nums, queue, sweep_dir)
            raise
        given_up = [wait for wait in waits if wait.given_up]
        for wait in given_up:
            log.warning("Slurm job %s: %s; cancelling it", wait.job_id, wait.given_up)
        slurm_queue.confirm_ends(waits, queue, self.bounds, {wait.job_id for wait in given_up})
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

    def _job_return(self, job: Any, num: int, wait: slurm_queue.JobWait,
                    overrides: Sequence[str]) -> Tuple[JobReturn, JobEnd]:
        if not wait.result:
            end = JobEnd(num, wait.job_id, wait.state, False, self._why(wait), wait.confirmed, wait.given_up_for)
            log.warning("job %d (Slurm %s) %s", num, wait.job_id, end.detail)
            return ended_without_result(overrides, end), end
        try:
            job_return = job.results()[0]
        except Exception as error:  # its result file holds an error (submitit's own, around the cell)
            detail = str(error).strip().splitlines()
            why = f"its result is an error: {detail[-1] if detail else error}"
            end = JobEnd(num, wait.job_id, wait.state, False, why, wait.confirmed)
            log.warning("job %d (Slurm %s) %s", num, wait.job_id, end.detail)
            return ended_without_result(overrides, end), end
        return job_return, JobEnd(num, wait.job_id, wait.state, True, confirmed=wait.confirmed)

    def _why(self, wait: slurm_queue.JobWait) -> str:
        """Why a job has no result: how Slurm showed it ended, or why the wait gave up on it and
        what cancelling it came to."""
        if not wait.given_up:
            return wait.ended
        if wait.confirmed:
            return f"{wait.given_up}; cancelled, and Slurm shows it ended ({wait.state})"
        return (f"{wait.given_up}; cancelled, but Slurm did not show its end within {self.bounds.cancel_wait_s:g} s "
                f"(last state {wait.state}): it may still run")

    def _cancel(self, jobs: Sequence[Any], nums: Sequence[int], queue: slurm_queue.SlurmQueue, sweep_dir: Path) -> None:
        """scancel the jobs without a result, confirm every job's end (bounded), record the ends."""
        waits = [slurm_queue.JobWait(str(job.job_id), result=_has_result(job)) for job in jobs]
        unfinished = [wait for wait in waits if not wait.result]
        for wait in unfinished:
            wait.given_up = "cancelled when the sweep was stopped"
        if unfinished:
            log.warning("the sweep was stopped: cancelling its Slurm jobs %s", " ".join(w.job_id for w in unfinished))
        try:
            slurm_queue.confirm_ends(waits, queue, self.bounds, {wait.job_id for wait in unfinished},
                         others_s=self.bounds.cancel_wait_s)
        finally:  # a second signal while confirming: what was seen is still recorded
            record_job_ends(sweep_dir, {
                num: JobEnd(num, wait.job_id, wait.state, wait.result, "" if wait.result else self._why(wait),
                            wait.confirmed, wait.given_up_for)
                for num, wait in zip(nums, waits)})


def _has_result(job: Any) -> bool:
    """Whether the job's result file is there (its folder touched first: on NFS a stat may lie)."""
    folder = job.paths.folder
    try:
        folder.chmod(folder.stat().st_mode)
    except OSError:
        pass
    return job.paths.result_pickle.exists()
