"""``hydra/launcher=ray``: every cell of a sweep as a Ray task, on a local Ray or a Ray cluster.

The published hydra-ray-launcher (1.2.2, its last release) pins ``cloudpickle<3`` for its AWS
half, which the joblib launcher's ``cloudpickle>=3`` excludes, so the two cannot share an
environment. Its local half is a few lines over Ray's core API; this is that half, on the Ray of
today, with the same configuration shape (``ray.init``: keyword arguments of ``ray.init``,
``ray.remote``: the options of each cell's task), so ``hydra.launcher.ray.init.address=auto``
joins a running cluster exactly as with the published plugin.

Two things the published plugin leaves to the user are done here:

* a worker of a cluster started with ``ray start`` has the environment of that command, not of
  the submitting shell, so the submitting shell's ``MEDEXP_*``, ``MLFLOW_*`` and ``HF_*``
  variables travel with each task (``runtime_env.env_vars``): a cell resolves
  ``${oc.env:MEDEXP_CACHE}`` and its tracking credentials as it would locally;
* the results come back as the tasks finish, in the order of the jobs; a task that ends without
  one (its node or worker lost once Ray's retries, ``ray.remote.max_retries``, are spent; an error
  of Ray's) does not stop the sweep: it is handed back as ended without a result, and every
  task's end is recorded in the sweep dir for the summary (medexp_grid_sweeper.job_ends);
* when the driving process is stopped (SIGTERM, SIGINT, SIGHUP: the sweep's callback turns them
  into exceptions), the tasks not yet finished are cancelled (``ray.cancel``: a running cell gets
  KeyboardInterrupt and ends its run KILLED), waited for up to ``CANCEL_WAIT_S``, and the
  interruption goes on up.
"""

# No ``from __future__ import annotations``: Hydra's plugin scan executes this module before it
# is in sys.modules, where dataclasses cannot resolve string annotations.
import logging
import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from hydra_plugins.medexp_grid_sweeper.job_ends import JobEnd, ended_without_result, record_job_ends

log = logging.getLogger(__name__)

# Environment variables of the submitting shell that each cell's task gets (by prefix).
FORWARDED_PREFIXES = ("MEDEXP_", "MLFLOW_", "HF_")
POLL_S = 1.0  # the longest the driver waits in Ray at once: a signal to it is handled between waits
CANCEL_WAIT_S = 60.0  # after ray.cancel, for the cells to end their runs


@dataclass
class RayOptions:
    init: Dict[str, Any] = field(default_factory=lambda: {"address": None, "dashboard_host": "127.0.0.1"})
    remote: Dict[str, Any] = field(default_factory=lambda: {"num_cpus": 1, "num_gpus": 0})


@dataclass
class RayLauncherConf:
    _target_: str = "hydra_plugins.medexp_ray_launcher.medexp_ray_launcher.RayLauncher"
    ray: RayOptions = field(default_factory=RayOptions)


ConfigStore.instance().store(group="hydra/launcher", name="ray", node=RayLauncherConf, provider="medexp")


def forwarded_environment(environ) -> Dict[str, str]:
    """The variables of ``environ`` that a cell's task gets: those named by FORWARDED_PREFIXES."""
    return {name: value for name, value in environ.items() if name.startswith(FORWARDED_PREFIXES)}


def run_cell_task(
    index: int,
    overrides: Sequence[str],
    hydra_context: HydraContext,
    config: DictConfig,
    task_function: TaskFunction,
    singleton_state: Dict[Any, Any],
) -> JobReturn:
    """One job of the sweep inside a Ray worker: Hydra's globals, the job's config, the cell."""
    setup_globals()
    Singleton.set_state(singleton_state)
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{index}"
        sweep_config.hydra.job.num = index
    HydraConfig.instance().set_config(sweep_config)
    return run_job(hydra_context=hydra_context, config=sweep_config, task_function=task_function,
                   job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")


class RayLauncher(Launcher):
    def __init__(self, ray: DictConfig) -> None:
        self.ray_options = ray
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import ray

        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)

        init_options = OmegaConf.to_container(self.ray_options.init, resolve=True)
        if not ray.is_initialized():
            if init_options.get("address"):
                # Joining a cluster: its nodes were started with their own dashboard settings.
                init_options.pop("dashboard_host", None)
            # ray.init makes SIGTERM exit the process at once; the sweep's own handler (which ends
            # the runs and cancels the tasks first) stays in charge.
            sigterm = signal.getsignal(signal.SIGTERM)
            ray.init(**init_options)
            if threading.current_thread() is threading.main_thread() and sigterm is not None:
                signal.signal(signal.SIGTERM, sigterm)
        remote_options: Dict[str, Any] = OmegaConf.to_container(self.ray_options.remote, resolve=True)
        environment = forwarded_environment(os.environ)
        if environment:
            runtime_env = dict(remote_options.get("runtime_env") or {})
            runtime_env["env_vars"] = {**environment, **(runtime_env.get("env_vars") or {})}
            remote_options["runtime_env"] = runtime_env
        task = ray.remote(run_cell_task).options(**remote_options)

        log.info("Ray is launching %d jobs (%s), sweep output dir: %s", len(job_overrides),
                 ", ".join(f"{key}={value}" for key, value in remote_options.items() if key != "runtime_env"),
                 sweep_dir)
        singleton_state = Singleton.get_state()
        refs = []
        for offset, overrides in enumerate(job_overrides):
            index = initial_job_idx + offset
            log.info("\t#%d : %s", index, " ".join(filter_overrides(overrides)))
            refs.append(task.remote(index, list(overrides), self.hydra_context, self.config,
                                    self.task_function, singleton_state))
        nums = [initial_job_idx + offset for offset in range(len(refs))]
        ends: Dict[int, JobEnd] = {}
        runs: List[Optional[JobReturn]] = [None] * len(refs)
        try:
            _collect(refs, nums, job_overrides, runs, ends, wait_s=None)
        except BaseException as error:  # the driver was stopped: its tasks go with it
            _cancel(refs, nums, job_overrides, runs, ends)
            record_job_ends(sweep_dir, ends)
            cause = error.__cause__
            if isinstance(error, SystemError) and isinstance(cause, BaseException) and not isinstance(cause, Exception):
                # Ray's wait checks for signals in compiled code, which turns the interruption a
                # signal handler raised into a SystemError: the interruption is what goes on up.
                raise cause from None
            raise
        record_job_ends(sweep_dir, ends)
        return runs


def _cancel(refs: Sequence[Any], nums: Sequence[int], job_overrides: Sequence[Sequence[str]],
            runs: List[Optional[JobReturn]], ends: Dict[int, JobEnd]) -> None:
    """ray.cancel the unfinished tasks and wait (bounded) for them; never raises (a local Ray may
    already be gone with the driver's children), so the interruption that called it goes on up."""
    import ray

    unfinished = [ref for ref, run in zip(refs, runs) if run is None]
    log.warning("the sweep was stopped: cancelling its %d unfinished Ray tasks", len(unfinished))
    try:
        for ref in unfinished:
            ray.cancel(ref)
        _collect(refs, nums, job_overrides, runs, ends, wait_s=CANCEL_WAIT_S)
    except Exception as error:
        log.warning("could not cancel the Ray tasks or wait for them: %s: %s", type(error).__name__, error)
    for index, ref in enumerate(refs):
        ends.setdefault(nums[index], JobEnd(nums[index], ref.task_id().hex(), "RAY_UNKNOWN", False,
                                            "the sweep was stopped; its end could not be seen"))


def _collect(refs: Sequence[Any], nums: Sequence[int], job_overrides: Sequence[Sequence[str]],
             runs: List[Optional[JobReturn]], ends: Dict[int, JobEnd], wait_s: Optional[float]) -> None:
    """Fill ``runs`` (by position) and ``ends`` (by job number) as the tasks finish, each in at
    most ``POLL_S`` of waiting at once; until all have, or for ``wait_s`` when given (the
    unfinished tasks are then recorded as such)."""
    import time

    import ray
    from ray.exceptions import RayError, TaskCancelledError

    deadline = None if wait_s is None else time.monotonic() + wait_s
    position = {ref: index for index, ref in enumerate(refs)}
    remaining = [ref for ref, run in zip(refs, runs) if run is None]
    while remaining and (deadline is None or time.monotonic() < deadline):
        ready, remaining = ray.wait(remaining, num_returns=1, timeout=POLL_S)
        for ref in ready:
            index = position[ref]
            num, task_id = nums[index], ref.task_id().hex()
            try:
                runs[index] = ray.get(ref)
                ends[num] = JobEnd(num, task_id, "RAY_FINISHED", True)
            except RayError as error:  # lost node or worker past its retries, cancelled, Ray's own error
                if isinstance(error, TaskCancelledError):
                    end = JobEnd(num, task_id, "RAY_CANCELLED", False, "cancelled when the sweep was stopped")
                else:
                    lines = [line for line in str(error).splitlines() if line.strip()]
                    end = JobEnd(num, task_id, "RAY_FAILED", False,
                                 f"{type(error).__name__}: {lines[0].strip() if lines else ''}"[:500])
                log.warning("job %d (Ray task %s) ended without a result: %s", num, task_id, end.detail)
                runs[index], ends[num] = ended_without_result(job_overrides[index], end), end
    for ref in remaining:
        index = position[ref]
        ends[nums[index]] = JobEnd(nums[index], ref.task_id().hex(), "RAY_RUNNING", False,
                                   f"still running {wait_s:.0f} s after it was cancelled")
