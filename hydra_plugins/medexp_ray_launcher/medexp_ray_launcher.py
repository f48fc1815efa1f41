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
* the results come back as the tasks finish, in the order of the jobs.
"""

# No ``from __future__ import annotations``: Hydra's plugin scan executes this module before it
# is in sys.modules, where dataclasses cannot resolve string annotations.
import logging
import os
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

log = logging.getLogger(__name__)

# Environment variables of the submitting shell that each cell's task gets (by prefix).
FORWARDED_PREFIXES = ("MEDEXP_", "MLFLOW_", "HF_")


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
            ray.init(**init_options)
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
        pending = []
        for offset, overrides in enumerate(job_overrides):
            index = initial_job_idx + offset
            log.info("\t#%d : %s", index, " ".join(filter_overrides(overrides)))
            pending.append(task.remote(index, list(overrides), self.hydra_context, self.config,
                                       self.task_function, singleton_state))
        runs: List[JobReturn] = ray.get(pending)
        return runs
