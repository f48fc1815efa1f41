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

    from medexp.config.schemas.overlap import flag_source_key, flag_source_name

    if not OmegaConf.has_resolver("medexp.root"):
        OmegaConf.register_new_resolver("medexp.root", lambda: str(project_root()))
    # a flag source's name and its part of the cell key, derived from its fields (conf/flags/)
    if not OmegaConf.has_resolver("medexp.flag_source"):
        OmegaConf.register_new_resolver("medexp.flag_source", flag_source_name)
    if not OmegaConf.has_resolver("medexp.flag_key"):
        OmegaConf.register_new_resolver("medexp.flag_key", flag_source_key)


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


def listed_model_config(entry: str):
    """The model config a list entry names: ``"<conf/model name>"`` alone, or followed by
    space-separated ``key=value`` overrides inside the model group, e.g.
    ``"demo_clean_mc demo.seed=11"`` (replicates that differ only in a field, which no config
    name can tell apart). Every list of models (``detector.reference_models``,
    ``detector.cohort``) resolves its entries here; a malformed entry or an override of a key the
    model's schema lacks is a ValueError naming the entry.
    """
    import re

    from hydra.errors import ConfigCompositionException

    name, *overrides = str(entry).split() or [""]
    malformed = [token for token in overrides if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*=\S+", token)]
    if not name or "=" in name or malformed:
        raise ValueError(f"model list entry {entry!r}: expected '<model config name> [key=value ...]' "
                         f"(e.g. 'demo_clean_mc demo.seed=11'), "
                         + (f"not {malformed[0]!r}" if malformed else f"not a name {name!r}"))
    if not overrides:
        return model_config(name)
    try:
        return _group_config("model", name, [f"model.{token}" for token in overrides])
    except (ConfigCompositionException, AssertionError) as error:
        # Hydra names the cause (an unknown key, a value of the wrong type) in the chained error; a
        # key inside a section the model leaves null (demo.seed on a hub model) fails an assertion
        # inside Hydra with no useful text
        cause = error.__cause__ or error
        reason = str(cause).splitlines()[0] if str(cause) else "it sets a field inside a section this model leaves null"
        raise ValueError(f"model list entry {entry!r}: cannot apply its overrides to model={name}: {reason}") \
            from error


def listed_model_configs(entries, target: str, field: str) -> dict:
    """The composed configs of a list of models (each entry resolved by :func:`listed_model_config`)
    by model name; a model named twice is a ValueError naming ``field``, the list's config key. An
    entry naming the cell's model ``target`` (as written or once composed) is left out, so a model
    is never its own reference."""
    configs, seen = {}, set()
    for entry in entries:
        reference = listed_model_config(str(entry))
        name = str(reference.name)
        if name in seen:
            raise ValueError(f"{field} names the model {name!r} twice: {list(entries)}")
        seen.add(name)
        if target not in (str(entry), name):
            configs[name] = reference
    return configs


def bench_config(name: str):
    """The benchmark config ``conf/bench/<name>.yaml``, composed as ``bench=<name>`` composes it."""
    return _group_config("bench", name)


def _group_config(group: str, name: str, overrides: list[str] | tuple[str, ...] = ()):
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import MissingConfigException

    overrides = [f"{group}={name}", *overrides]
    try:
        if GlobalHydra.instance().is_initialized():
            from hydra import compose as hydra_compose

            return hydra_compose(config_name="config", overrides=overrides)[group]
        return compose(overrides)[group]
    except MissingConfigException as error:
        raise ValueError(f"no {group} config named {name!r}: {error}") from error


__all__ = [
    "bench_config",
    "compose",
    "conf_dir",
    "listed_model_config",
    "listed_model_configs",
    "model_config",
    "project_root",
    "quiet_launcher_schema_warning",
    "register_resolvers",
    "register_schemas",
]
