"""conf/hydra/launcher/*.yaml shadow the plugins' own configs, so each must be complete and typed right."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from medexp.config import conf_dir
from tests.conftest import run_medexp

LAUNCHERS = Path(conf_dir()) / "hydra" / "launcher"
# Hydra validates our files against the plugins' schemas of the same name (wanted) and warns that
# this matching is deprecated; medexp silences it at import, pytest's own filters bring it back.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:\s*'hydra/launcher/\w+' is validated against ConfigStore schema:UserWarning"
)


def hydra_config(*overrides: str):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True).hydra


def plugin_schemas():
    from hydra_plugins.hydra_joblib_launcher.config import JobLibLauncherConf
    from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf
    from hydra_plugins.medexp_ray_launcher.medexp_ray_launcher import RayLauncherConf
    from hydra_plugins.medexp_slurm_launcher.medexp_slurm_launcher import MedexpSlurmQueueConf

    return {"joblib": JobLibLauncherConf, "submitit_local": LocalQueueConf, "submitit_slurm": MedexpSlurmQueueConf,
            "ray": RayLauncherConf}


def test_medexp_slurm_launcher_takes_exactly_the_published_launchers_options():
    # Hydra validates conf/hydra/launcher/submitit_slurm.yaml against the plugin's own schema of
    # that name, so medexp's subclass may not add an option.
    from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
    from hydra_plugins.medexp_slurm_launcher.medexp_slurm_launcher import MedexpSlurmQueueConf

    assert set(OmegaConf.structured(MedexpSlurmQueueConf).keys()) == set(OmegaConf.structured(SlurmQueueConf).keys())


@pytest.mark.parametrize("name", ["joblib", "submitit_local", "submitit_slurm", "ray"])
def test_launcher_file_sets_every_field_of_the_plugin_schema_with_valid_types(name):
    schema = OmegaConf.structured(plugin_schemas()[name])
    ours = OmegaConf.load(LAUNCHERS / f"{name}.yaml")
    ours.pop("defaults", None)  # submitit_slurm's names the wait's bounds (below), checked by their own schema
    assert set(ours.keys()) == set(schema.keys())
    merged = OmegaConf.merge(schema, ours)  # raises on a wrong type or an unknown key
    assert merged._target_ == schema._target_


@pytest.mark.parametrize("name", ["joblib", "submitit_local", "submitit_slurm", "ray"])
def test_launcher_is_selected_by_name(name):
    launcher = hydra_config(f"hydra/launcher={name}").launcher
    assert launcher._target_ == OmegaConf.load(LAUNCHERS / f"{name}.yaml")._target_


def test_the_slurm_launchers_wait_bounds_compose_typed_and_are_checked_when_it_is_made():
    from hydra.errors import ConfigCompositionException
    from hydra.utils import instantiate

    from hydra_plugins.medexp_slurm_launcher.slurm_queue import WaitBounds

    launcher = hydra_config("hydra/launcher=submitit_slurm", "hydra.launcher.wait.held_s=60").launcher
    assert dict(launcher.wait) == {**vars(WaitBounds()), "held_s": 60.0}
    with pytest.raises(ConfigCompositionException):  # not a number: refused as the config is composed
        hydra_config("hydra/launcher=submitit_slurm", "hydra.launcher.wait.held_s=soon")
    with pytest.raises(ConfigCompositionException):  # not a bound
        hydra_config("hydra/launcher=submitit_slurm", "hydra.launcher.wait.hold_s=60")
    negative = hydra_config("hydra/launcher=submitit_slurm", "hydra.launcher.wait.cancel_wait_s=-5",
                            "hydra.sweep.dir=/tmp/unused").launcher
    with pytest.raises(Exception, match=r"hydra.launcher.wait.cancel_wait_s must be >= 0 seconds, got -5"):
        instantiate(negative)


def test_ray_file_keeps_the_published_ray_launcher_shape():
    # hydra-ray-launcher's RayLauncherConf: ray: {init: dict, remote: dict}, so its commands
    # (hydra.launcher.ray.init.address=auto) work unchanged on medexp's launcher.
    ours = OmegaConf.load(LAUNCHERS / "ray.yaml")
    assert set(ours.ray.keys()) == {"init", "remote"}
    assert ours.ray.init.address is None  # a local Ray unless told otherwise
    assert ours.ray.init.dashboard_host == "127.0.0.1"


def test_ray_launcher_composes_from_the_command_line():
    result = run_medexp("hydra/launcher=ray", "hydra.launcher.ray.init.address=auto", "--cfg", "hydra",
                        "--package", "hydra.launcher")
    assert result.returncode == 0, result.stderr
    launcher = OmegaConf.create(result.stdout)  # printed as "# @package hydra.launcher" + its content
    assert launcher._target_ == "hydra_plugins.medexp_ray_launcher.medexp_ray_launcher.RayLauncher"
    assert launcher.ray.init.address == "auto"
    assert launcher.ray.remote.num_cpus == 1


def test_primary_config_selects_the_grid_sweeper_and_the_sweep_callback():
    hydra = hydra_config()
    assert hydra.sweeper._target_.endswith("MedexpGridSweeper")
    assert hydra.sweeper.grid is None
    assert hydra.callbacks.sweep_parent_run._target_ == "medexp.runner.sweep.SweepParentRun"
