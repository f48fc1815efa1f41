"""Config tests at two levels: every YAML composes; the CLI rejects bad input clearly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import medexp
from medexp.config import compose, conf_dir
from tests.conftest import REPO, run_medexp

GROUPS = ("model", "bench", "detector", "control", "tracking")


def _options(group: str) -> list[str]:
    return sorted(path.stem for path in (conf_dir() / group).glob("*.yaml"))


# Configs named otherwise on purpose: a replicate's name carries its seed (one cell per seed); a
# replicate control keeps the name of the control it replicates (its cells are that control's).
RENAMED = {("model", "demo_clean_replicate"): "demo_clean_s10", ("model", "demo_leaky_replicate"): "demo_leaky_e30_s10",
           ("control", "negative_demo_ood_replicate"): "negative_demo_ood",
           ("model", "demo_clean_mc"): "demo_clean_mc_s10", ("model", "demo_leaky_mc"): "demo_leaky_mc_e30_s10",
           ("model", "demo_clean_probes"): "demo_clean_probes_s10", ("model", "demo_leaky_probes"): "demo_leaky_probes_e30_s10"}
# Configs that only compose beside another choice (they read its values).
COMPANIONS = {("control", "negative_demo_ood_replicate"): ["detector=image_nn", "corpus@detector.corpus=demo_replicate"]}


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in _options(g)])
def test_every_group_option_composes(group, option):
    cfg = compose([f"{group}={option}", *COMPANIONS.get((group, option), [])])
    node = cfg[group]
    if (group, option) in RENAMED:
        assert node.name == RENAMED[group, option]
    elif group != "tracking":
        # a detector may append its variant to the name (image_nn-<embedder>-<corpus>)
        assert node.name == option or node.name.startswith(f"{option}-"), f"conf/{group}/{option}.yaml must set name: {option}"
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves


AUDITED_MODELS = ("internvl3", "qwen2_5_vl", "chexagent", "llava_onevision", "medgemma", "blip2", "instructblip")
AUDITED_BENCHES = ("slake", "pathvqa", "vqa_rad", "omnimedvqa")


@pytest.mark.parametrize("model", AUDITED_MODELS)
def test_every_audited_model_composes_with_every_audited_benchmark(model):
    for bench in AUDITED_BENCHES:
        cfg = compose([f"model={model}", f"bench={bench}"])
        assert (cfg.model.name, cfg.bench.name) == (model, bench)
        assert cfg.model.pretrained and cfg.bench.hub_id  # the real hub sources are configured
        # remote code only where the model's own file asks for it
        assert cfg.model.trust_remote_code is (model == "chexagent")


def test_the_cli_prints_an_audited_cell():
    result = run_medexp("model=qwen2_5_vl", "bench=slake", "--cfg", "job")
    assert result.returncode == 0, result.stderr
    job = OmegaConf.create(result.stdout)
    assert job.model.pretrained == "Qwen/Qwen2.5-VL-7B-Instruct" and job.bench.hub_id == "BoKelvin/SLAKE"


def test_default_cell_is_the_offline_demo():
    cfg = compose([])
    assert (cfg.model.name, cfg.bench.name, cfg.detector.name, cfg.control.name) == ("demo_leaky", "demo", "exch", "none")
    assert cfg.model.trust_remote_code is False
    assert Path(cfg.paths.root) == REPO


def test_detector_schema_follows_the_chosen_file():
    from medexp.config.schemas import ExchConfig, ExchRankConfig

    assert OmegaConf.get_type(compose([]).detector) is ExchConfig
    assert OmegaConf.get_type(compose(["detector=exch_rank"]).detector) is ExchRankConfig


@pytest.mark.parametrize(
    "override,message",
    [
        ("model=no_such_model", "Available options in 'model'"),
        ("detector.shards=many", "detector.shards"),
        ("detector.unknown_key=1", "unknown_key"),
        ("model.dtype=int8", "expected one of [float32, bfloat16, float16]"),
        ("detector=exch_rank detector.shards=3", "shards"),
        ("model.batch_size=1.5", "model.batch_size"),
    ],
)
def test_bad_overrides_fail_at_composition_with_a_clear_message(override, message):
    result = run_medexp(*override.split(), "--cfg", "job")
    assert result.returncode != 0
    assert message in result.stderr + result.stdout


def test_unknown_group_option_lists_the_available_ones():
    result = run_medexp("control=nope", "--cfg", "job")
    assert result.returncode != 0
    for option in _options("control"):
        assert option in result.stderr


def test_help_lists_groups_and_imports_nothing_heavy():
    result = run_medexp("--help")
    assert result.returncode == 0
    assert "detector: codec, composition_sweep, dataset_inference, exch, exch_rank" in result.stdout
    probe = (
        "import sys, medexp; from medexp.config import compose; compose(['detector=exch_rank']);"
        "heavy = [m for m in ('torch', 'transformers', 'mlflow', 'open_clip', 'faiss', 'pandas') if m in sys.modules];"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    lazy = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True)
    assert lazy.returncode == 0, lazy.stdout + lazy.stderr


def test_import_registers_schemas_for_the_compose_api():
    from hydra.core.config_store import ConfigStore

    assert medexp.__version__
    assert "config_schema.yaml" in ConfigStore.instance().list("")


def test_paths_are_anchored_at_the_project_root_from_any_directory(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "medexp", "--cfg", "job", "--resolve"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    resolved = OmegaConf.create(result.stdout)
    assert Path(resolved.paths.root) == REPO
    assert not any(tmp_path.iterdir())  # nothing written where the command was run
