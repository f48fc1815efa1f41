"""``--help`` of the Hydra entry points (medexp.config.help): the text Hydra's own help prints for
the same command line, computed in the test by Hydra's ``@hydra.main`` around the same task;
every other command line reaches Hydra unchanged."""

from __future__ import annotations

import pytest

from medexp.config import conf_dir
from tests.conftest import run_medexp, run_under_hydras_own_main


@pytest.mark.parametrize("module,config_path,config_name,arguments", [
    ("medexp", str(conf_dir()), "config", ["--help"]),
    # the short flag, overrides in the composed config and --resolve, on the other entry
    ("medexp.train", str(conf_dir() / "train"), "train", ["-h", "references=8", "seeds=[1,2]", "--resolve"]),
])
def test_help_prints_what_hydras_own_help_prints(module, config_path, config_name, arguments):
    fast = run_medexp(*arguments, module=module)
    hydra_own = run_under_hydras_own_main(module, config_path, config_name, *arguments)
    assert fast.returncode == hydra_own.returncode == 0, fast.stderr + hydra_own.stderr
    assert fast.stdout == hydra_own.stdout
    assert fast.stdout.strip()


def test_help_lists_every_config_group_of_conf():
    listed = {line.partition(":")[0] for line in run_medexp("--help").stdout.splitlines() if ": " in line}
    groups = {str(path.parent.relative_to(conf_dir())) for path in conf_dir().rglob("*.yaml")
              if path.parent != conf_dir() and not path.is_relative_to(conf_dir() / "hydra")}
    assert groups - listed == set()


def test_help_with_a_config_dir_is_hydras_own(tmp_path):
    """--config-dir adds a search path, which Hydra's listing reads: that help is Hydra's."""
    (tmp_path / "extra_group").mkdir()
    (tmp_path / "extra_group" / "only_option.yaml").write_text("value: 1\n")
    result = run_medexp("--help", "--config-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "extra_group: only_option" in result.stdout.splitlines()


def test_other_flags_reach_hydra():
    hydra_help = run_medexp("--hydra-help")
    assert hydra_help.returncode == 0, hydra_help.stderr
    assert hydra_help.stdout.startswith("Hydra (")
    assert "hydra/launcher: " in hydra_help.stdout
    config = run_medexp("--cfg", "job", "detector=exch_rank")
    assert config.returncode == 0, config.stderr
    assert "name: exch_rank" in config.stdout
