"""The Hydra callback that refuses a secret before anything is written.

Hydra saves the composed config and the command-line overrides under the run's ``.hydra/``
folder (and a sweep's ``multirun.yaml``) before the task starts, so a key pasted where a
variable's name belongs (``model.api_key_env=sk-...``) must be refused earlier: on run start and
on sweep start, before any output folder exists. The check covers the composed config, every
command-line override (a sweep's values included) and a declared grid (``hydra.sweeper.grid``);
the message never shows the value. Exit status 2, like every bad config value.
"""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from medexp.config.secrets import ENV_NAME_KEYS, env_name_problem, override_problems


def secret_problems(config: DictConfig) -> list[str]:
    """Why ``config`` (a primary config, with its ``hydra`` node) would record a secret."""
    overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=None) or [])
    grid = OmegaConf.select(config, "hydra.sweeper.grid", default=None)
    for block in OmegaConf.to_container(grid, resolve=False) if OmegaConf.is_config(grid) else grid or []:
        if isinstance(block, dict):
            overrides += [f"{key}={','.join(map(str, value)) if isinstance(value, list) else value}"
                          for key, value in block.items()]
    problems = override_problems(overrides)
    # Unresolved: an interpolation such as ${oc.env:OPENAI_API_KEY} where a name belongs would put the key itself there.
    task = OmegaConf.to_container(config, resolve=False) if isinstance(config, DictConfig) else {}
    task.pop("hydra", None)
    problems += _config_problems(task, "")
    return problems


def _config_problems(node: Any, path: str) -> list[str]:
    if isinstance(node, dict):
        found = []
        for key, value in node.items():
            name = f"{path}.{key}" if path else str(key)
            if key in ENV_NAME_KEYS and not isinstance(value, (dict, list)):
                problem = env_name_problem(value, name)
                if problem:
                    found.append(problem)
            else:
                found += _config_problems(value, name)
        return found
    if isinstance(node, list):
        return [problem for index, item in enumerate(node) for problem in _config_problems(item, f"{path}[{index}]")]
    return []


class RefuseSecrets(Callback):
    """``hydra.callbacks.refuse_secrets``: exit 2 before Hydra writes a config that holds a secret."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refuse(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refuse(config)


def _refuse(config: DictConfig) -> None:
    problems = secret_problems(config)
    if problems:
        print(f"medexp: error: {problems[0]}", file=sys.stderr)
        sys.exit(2)
