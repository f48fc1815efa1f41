"""Configuration: schemas, project paths and Hydra compose helpers."""

from __future__ import annotations

import os
from pathlib import Path

from medexp.config.schemas import register_schemas

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def project_root() -> Path:
    """The directory holding conf/ and mlruns/: $MEDEXP_ROOT, else the checkout medexp lives in."""
    env = os.environ.get("MEDEXP_ROOT")
    if env:
        return Path(env).expanduser().resolve()
    return _PACKAGE_DIR.parent


def conf_dir() -> Path:
    return project_root() / "conf"


def register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("medexp.root"):
        OmegaConf.register_new_resolver("medexp.root", lambda: str(project_root()))


def quiet_launcher_schema_warning() -> None:
    """Silence Hydra's deprecation warning about conf/hydra/launcher/*.yaml.

    Those files replace the launcher plugins' configs of the same names on purpose; Hydra validates
    them against the plugins' schemas (wanted) and warns in every job that matching a schema by name
    is deprecated (noise).
    """
    import warnings

    warnings.filterwarnings(
        "ignore", message=r"\s*'hydra/launcher/\w+' is validated against ConfigStore schema", category=UserWarning
    )


# config registers its schemas and resolver with Hydra itself, when it is first imported, in every
# process, rather than where medexp composes: a launcher's worker process re-composes the job's
# config and resolves ``hydra.sweep.dir`` (which names ``${medexp.root:}``) before any code of the
# job runs, having imported medexp.config only by unpickling the job's callbacks (medexp.config.gate).
register_schemas()
register_resolvers()
quiet_launcher_schema_warning()


def compose(overrides: list[str] | None = None, config_name: str = "config"):
    """Compose the medexp config outside ``python -m medexp`` (tests, notebooks)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=list(overrides or []))


def model_config(name: str):
    """The model config ``conf/model/<name>.yaml``, composed as ``model=<name>`` composes it.

    Inside a running Hydra app (``python -m medexp``) this uses that app's search path;
    elsewhere it composes from conf/ like :func:`compose`.
    """
    return _group_config("model", name)


def bench_config(name: str):
    """The benchmark config ``conf/bench/<name>.yaml``, composed as ``bench=<name>`` composes it."""
    return _group_config("bench", name)


def _group_config(group: str, name: str):
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import MissingConfigException

    try:
        if GlobalHydra.instance().is_initialized():
            from hydra import compose as hydra_compose

            return hydra_compose(config_name="config", overrides=[f"{group}={name}"])[group]
        return compose([f"{group}={name}"])[group]
    except MissingConfigException as error:
        raise ValueError(f"no {group} config named {name!r}: {error}") from error


__all__ = [
    "bench_config",
    "compose",
    "conf_dir",
    "model_config",
    "project_root",
    "quiet_launcher_schema_warning",
    "register_resolvers",
    "register_schemas",
]
