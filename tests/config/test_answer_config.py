"""The answers schema and the black-box model configs: composition, validation, no key in config."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from medexp.config import compose
from medexp.config.schemas import AnswerConfig, AnswerMode, FreeTextMetric, ModelFamily, check_answer_config
from tests.conftest import run_medexp


def test_defaults_are_greedy_short_and_strict():
    cfg = AnswerConfig()
    assert (cfg.mode, cfg.max_new_tokens, cfg.temperature, cfg.allow_sampling, cfg.system_prompt) == \
        (AnswerMode.generate, 8, 0.0, False, None)
    assert cfg.length_normalise is True
    check_answer_config(cfg)


def test_the_judge_is_its_own_group_read_by_default():
    """How replies are judged is the cell's judge, not the answer section (issue 55)."""
    assert not hasattr(AnswerConfig(), "free_text_metric")
    cfg = compose([])
    assert (cfg.judge.name, cfg.judge.kind) == ("read", "read")
    exact = compose(["judge=exact", "judge.free_text_metric=rouge_l"]).judge
    assert FreeTextMetric(exact.free_text_metric) is FreeTextMetric.rouge_l
    with pytest.raises(Exception, match="rouge_threshold"):
        compose(["judge=read", "judge.rouge_threshold=0.5"])  # a setting of another judge is refused
    from medexp.config.ranges import ConfigRangeError, validate

    with pytest.raises(ConfigRangeError, match=r"judge.rouge_threshold=0.0 is out of range: allowed \(0, 1\]"):
        validate(compose(["judge=exact", "judge.rouge_threshold=0.0"]))


def test_the_schema_is_registered_and_typed():
    from hydra.core.config_store import ConfigStore

    assert "answer.yaml" in ConfigStore.instance().list("schema")
    node = OmegaConf.structured(AnswerConfig)
    with pytest.raises(ValidationError, match="temperature"):
        node.temperature = "hot"
    with pytest.raises(ValidationError, match="expected one of \\[likelihood, generate\\]"):
        node.mode = "vote"
    with pytest.raises(Exception, match="top_k"):
        OmegaConf.merge(node, {"top_k": 5})
    node.merge_with({"temperature": 0.0, "length_normalise": False})
    check_answer_config(node)  # the OmegaConf node validates like the dataclass


@pytest.mark.parametrize(("change", "message"), [
    ({"temperature": 0.7}, r"answer.temperature=0.7: answers are greedy .* unless answer.allow_sampling=true"),
    ({"temperature": -1.0, "allow_sampling": True}, r"answer.temperature=-1.0 is out of range: allowed >= 0"),
    ({"max_new_tokens": 0}, r"answer.max_new_tokens=0 is out of range: allowed >= 1"),
    ({"choice_template": "{question}\nAnswer:"}, r"answer.choice_template lacks \['options'\]"),
    ({"choice_template": "{question}\n{options}\n{context}"}, r"answer.choice_template has unknown field\(s\) \['context'\]"),
    ({"option_line": "{text}"}, r"answer.option_line lacks \['letter'\]"),
    ({"free_text_template": "Fill in: {prompt}"}, r"answer.free_text_template lacks \['question'\]"),
    ({"free_text_template": "{question} {"}, r"answer.free_text_template: .*write a literal brace"),
    ({"system_prompt": "  "}, "answer.system_prompt is empty"),
])
def test_bad_values_are_named(change, message):
    with pytest.raises(ValueError, match=message):
        check_answer_config(dataclasses.replace(AnswerConfig(), **change))


def test_sampling_is_allowed_when_said():
    check_answer_config(AnswerConfig(temperature=0.7, allow_sampling=True))


def test_black_box_model_configs_compose():
    model = compose(["model=openai_compatible"]).model
    assert model.family is ModelFamily.openai_compatible and model.base_url == "http://127.0.0.1:8000/v1"
    assert model.api_key_env is None and model.max_concurrency >= 1 and model.max_retries >= 0
    model = compose(["model=responses", "model.responses_path=/data/run.jsonl"]).model
    assert model.family is ModelFamily.responses and model.responses_path == "/data/run.jsonl"


def test_the_cli_composes_a_served_model_and_never_resolves_the_api_key(monkeypatch):
    monkeypatch.setenv("MEDEXP_TEST_API_KEY", "sk-test-secret-456")
    overrides = ["model=openai_compatible", "model.base_url=http://10.1.2.3:8000/v1", "model.name=qwen_served",
                 "model.pretrained=Qwen/Qwen2.5-VL-7B-Instruct", "model.api_key_env=MEDEXP_TEST_API_KEY"]
    resolved = OmegaConf.to_yaml(compose(overrides), resolve=True)
    assert "MEDEXP_TEST_API_KEY" in resolved and "sk-test-secret-456" not in resolved
    result = run_medexp(*overrides, "--cfg", "job")  # the variable is set in its environment
    assert result.returncode == 0, result.stderr
    job = OmegaConf.create(result.stdout)
    assert (job.model.family, job.model.base_url, job.model.name, job.model.api_key_env) == \
        ("openai_compatible", "http://10.1.2.3:8000/v1", "qwen_served", "MEDEXP_TEST_API_KEY")
    assert "sk-test-secret-456" not in result.stdout + result.stderr


@pytest.mark.parametrize("model", ["openai_compatible", "responses"])
def test_a_black_box_model_has_no_scorer(model, tmp_path):
    from medexp.models import load_scorer

    with pytest.raises(ValueError, match=f"model family '{model}' is a black box"):
        load_scorer(compose([f"model={model}"]).model, tmp_path)
