"""The audited models' config files compose from the command line, and declare what they load."""

from __future__ import annotations

import pytest

from medexp.config import compose
from medexp.models import ADAPTERS
from tests.conftest import run_medexp

AUDITED = {
    "internvl3": ("internvl", "OpenGVLab/InternVL3-8B-hf"),
    "qwen2_5_vl": ("qwen2_5_vl", "Qwen/Qwen2.5-VL-7B-Instruct"),
    "llava_onevision": ("llava_onevision", "llava-hf/llava-onevision-qwen2-7b-ov-hf"),
    "medgemma": ("gemma3", "google/medgemma-4b-it"),
}


@pytest.mark.parametrize("model", sorted(AUDITED))
@pytest.mark.parametrize("bench", ["demo"])
def test_cli_composes_the_model_with_the_benchmark(model, bench):
    result = run_medexp(f"model={model}", f"bench={bench}", "--cfg", "job")
    assert result.returncode == 0, result.stderr
    family, hub_id = AUDITED[model]
    assert f"  name: {model}\n  family: {family}\n" in result.stdout
    assert f"  pretrained: {hub_id}\n" in result.stdout


@pytest.mark.parametrize("model", sorted(AUDITED))
def test_audited_model_settings(model):
    cfg = compose([f"model={model}"]).model
    family, hub_id = AUDITED[model]
    assert (cfg.family.value, cfg.pretrained, cfg.source.value) == (family, hub_id, "hub")
    assert family in ADAPTERS
    assert cfg.trust_remote_code is False
    assert cfg.revision is None and cfg.device_map is None
    assert cfg.dtype.value == "bfloat16" and cfg.device == "auto"
    assert cfg.use_chat_template is True and "{question}" in cfg.prompt_template
    assert cfg.token_budget > 0 and cfg.batch_size > 0
