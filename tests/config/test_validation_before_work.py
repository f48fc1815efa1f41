"""Every list, count and enum setting is checked on the composed config before any work, with the
key named (``python -m medexp`` exits 2); a value that looks like a key where a variable's name
belongs is refused without being shown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from medexp.config import compose
from medexp.config.ranges import ConfigRangeError, validate
from medexp.config.secrets import looks_like_secret, override_problems

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-proj-AbC123xYz789SecretSecret"


@pytest.mark.parametrize(("overrides", "message"), [
    (["detector=memorization", "detector.seeds=[]"], "detector.seeds=[] names no seed"),
    (["detector=memorization", "detector.seeds=[1,2,1]"], "detector.seeds repeats [1]"),
    (["detector=membership", "detector.pairs=[]"], "detector.pairs is empty"),
    (["model=demo_leaky", "detector=memorization", "detector.pairs=[{independent:demo_leaky}]"],
     "detector.pairs[0] pairs model demo_leaky with itself"),
    (["detector=membership", "detector.pairs=[{candidate:demo_clean,independent:demo_clean}]"],
     "detector.pairs[0] pairs model demo_clean with itself"),
    (["detector=memorization", "detector.risk_tiers=[0.3,0.1]"], "detector.risk_tiers=[0.3, 0.1] must be two increasing"),
    (["detector=memorization", "detector.risk_tiers=[0.1]"], "must be two increasing bounds"),
    (["detector=membership", "detector.fprs=[]"], "detector.fprs=[] names no false-positive rate"),
    (["detector=membership", "detector.fprs=[0.01,1.5]"], "detector.fprs=[0.01, 1.5] is out of range"),
    (["detector=dataset_inference", "detector.features=[]"], "detector.features=[] names no feature"),
    (["detector=dataset_inference", "detector.features=[min_k,min_k]"], "detector.features repeats"),
    (["detector=dataset_inference", "detector.k_percent=0"], "detector.k_percent=0"),
    (["detector=codec", "detector.n_context=0"], "detector.n_context=0"),
    (["detector=codec", "detector.context_template='Q: {question}'"], "lacks ['{answer}']"),
    (["detector=membership", "detector.fdr=1.5"], "detector.fdr=1.5 is out of range"),
    (["detector=membership", "detector.shift_folds=1"], "detector.shift_folds=1 is out of range"),
    (["model=demo_vit", "model.train.dp.accountant=bogus"], "model.train.dp.accountant='bogus' is not an opacus accountant"),
    (["model=demo_vit", "model.train.dp.delta=0"], "model.train.dp.delta=0"),
    (["model=demo_vit", "model.train.replicate_seeds=[]"], "model.train.replicate_seeds=[] names no seed"),
    (["detector=option_order", "detector.answer.min_answered=1.5"], "detector.answer.min_answered=1.5 is out of range"),
    (["model=openai_compatible", "model.retry_after_max=0"], "model.retry_after_max=0"),
    (["model=responses", "model.reply_fields=[]"], "model.reply_fields is empty"),
    (["model=responses", "+model.status_map={failed:bogus}"], "model.status_map.failed='bogus'"),
])
def test_bad_settings_are_named_before_any_work(overrides, message):
    with pytest.raises(ConfigRangeError) as raised:
        validate(compose(overrides))
    assert message in str(raised.value)


@pytest.mark.parametrize("value", [SECRET, "hf_AbCdEfGhIjKlMnOpQrStUvWx", "AKIAIOSFODNN7EXAMPLE",
                                   "ghp_0123456789abcdefABCDEF", "aB3dE5gH7jK9mN1pQ3sT", "Bearer abc", "key with space"])
def test_a_secret_where_a_variable_name_belongs_is_refused_unshown(value):
    assert looks_like_secret(value)
    with pytest.raises(ConfigRangeError) as raised:
        validate(compose(["model=openai_compatible", f"model.api_key_env='{value}'"]))
    assert "model.api_key_env must name the environment variable" in str(raised.value)
    assert value not in str(raised.value)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "HF_TOKEN", "AZURE_OPENAI_KEY_2", "my_key"])
def test_variable_names_are_accepted(name):
    assert not looks_like_secret(name)
    validate(compose(["model=openai_compatible", f"model.api_key_env={name}"]))


def test_sweep_overrides_are_checked_value_by_value():
    assert override_problems(["model.api_key_env=OPENAI_API_KEY", "detector.alpha=0.1"]) == []
    assert override_problems([f"model.api_key_env=OPENAI_API_KEY,{SECRET}"])
    assert override_problems([f"model.api_key_env=choice(OPENAI_API_KEY,'{SECRET}')"])
    assert all(SECRET not in problem for problem in override_problems([f"+model.api_key_env={SECRET}"]))


def test_the_gate_reads_the_config_overrides_and_a_declared_grid():
    from omegaconf import OmegaConf

    from medexp.config.gate import secret_problems

    clean = OmegaConf.create({"model": {"api_key_env": "OPENAI_API_KEY"},
                              "hydra": {"overrides": {"task": ["model.api_key_env=OPENAI_API_KEY"]}}})
    assert secret_problems(clean) == []
    interpolated = OmegaConf.create({"model": {"api_key_env": "${oc.env:OPENAI_API_KEY}"}})
    assert secret_problems(interpolated)  # the key itself would land in the config
    grid = OmegaConf.create({"model": {"api_key_env": None},
                             "hydra": {"sweeper": {"grid": [{"model.api_key_env": ["OPENAI_API_KEY", SECRET]}]}}})
    assert secret_problems(grid) and SECRET not in " ".join(secret_problems(grid))


def test_the_cli_exits_2_naming_the_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    result = subprocess.run([sys.executable, "-m", "medexp", "detector=memorization", "detector.seeds=[]",
                             f"tracking.uri=sqlite:///{tmp_path / 'never.db'}", f"hydra.run.dir={tmp_path / 'run'}"],
                            cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "detector.seeds=[] names no seed" in result.stderr
    assert not (tmp_path / "never.db").exists()
