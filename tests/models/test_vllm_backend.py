"""model.backend=vllm: the vLLM scorer's contract, tested through a stand-in engine that follows
vLLM's documented output types (vLLM itself needs a CUDA machine and is not installed here)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from medexp.config import compose
from medexp.config.ranges import ConfigRangeError, validate
from medexp.models import load_scorer
from medexp.models.keys import model_settings_key
from medexp.models.vllm_scorer import VLLMScorer
from tests.models import tiny
from tests.models.conftest import make_scorer, model_config
from tests.models.vllm_standin import RequestOutput, StandInLLM, standin_engine

ATOL = 1e-4


def vllm_scorer(directory, family: str, engine=standin_engine) -> VLLMScorer:
    return VLLMScorer(model_config(family, backend="vllm"), str(directory), engine_factory=engine)


@pytest.mark.parametrize("name", sorted(tiny.FAMILIES))
def test_scores_equal_the_transformers_scorer(tiny_checkpoint, tiny_examples, name):
    directory = tiny_checkpoint(name)
    family = tiny.FAMILIES[name].family  # the demo models' LLaVA is the generic adapter's
    examples = [*tiny_examples[0], *tiny_examples[1]]
    expected = make_scorer(directory, family).score_examples(examples)
    got = vllm_scorer(directory, family).score_examples(examples)
    assert list(got.columns) == list(expected.columns)
    for column in ("example_id", "position", "n_answer_tokens", "boundary_merged"):
        assert got[column].tolist() == expected[column].tolist(), column
    for a, b in zip(got["token_logprobs"], expected["token_logprobs"]):
        np.testing.assert_allclose(a, b, rtol=0, atol=ATOL)
    np.testing.assert_allclose(got["sum_logprob"], expected["sum_logprob"], rtol=0, atol=ATOL * 10)
    np.testing.assert_allclose(got["mean_logprob"], expected["mean_logprob"], rtol=0, atol=ATOL)
    # No full next-token distribution from vLLM: z is undefined, never approximated.
    assert all(np.isnan(z).all() and len(z) == n for z, n in zip(got["token_minkpp_z"], got["n_answer_tokens"]))
    assert np.isfinite(np.concatenate(expected["token_minkpp_z"].tolist())).all()


def test_requests_are_token_prompts_with_the_image_unexpanded(tiny_checkpoint, tiny_examples):
    scorer = vllm_scorer(tiny_checkpoint("qwen2_5_vl"), "qwen2_5_vl")
    image, text = tiny_examples[0][2], tiny_examples[1][0]
    scorer.score_examples([image, text])
    sent_image, sent_text = scorer.engine.llm.requests
    pad = scorer.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert sent_image["prompt_token_ids"].count(pad) == 1  # vLLM expands the placeholder itself
    assert sent_image["multi_modal_data"]["image"].size == (32, 56)
    assert "multi_modal_data" not in sent_text
    answer_ids = scorer._prepare(text).answer_ids
    assert sent_text["prompt_token_ids"][-len(answer_ids):] == answer_ids


def test_the_image_changes_the_scores(tiny_checkpoint, tiny_examples):
    from medexp.benchmarks.base import Example

    scorer = vllm_scorer(tiny_checkpoint("qwen2_5_vl"), "qwen2_5_vl")
    a = tiny_examples[0][0]
    b = Example("tiny::test::swap", 0, tiny_examples[0][3].image, a.question, a.answer)
    ra, rb = scorer.score_examples([a, b]).to_dict("records")
    assert np.max(np.abs(np.subtract(ra["token_logprobs"], rb["token_logprobs"]))) > 1e-3


class RewritingLLM(StandInLLM):
    """An engine that adds a token at the end of every prompt: the answer no longer ends it."""

    def generate(self, prompts, sampling_params, use_tqdm=True) -> list[RequestOutput]:
        return super().generate([{**p, "prompt_token_ids": [*p["prompt_token_ids"], 0]} for p in prompts],
                                sampling_params, use_tqdm)


def test_an_engine_that_rewrites_the_prompt_is_refused(tiny_checkpoint, tiny_examples):
    from medexp.models.vllm_scorer import Engine
    from tests.models.vllm_standin import SamplingParams

    scorer = vllm_scorer(tiny_checkpoint("qwen2_5_vl"), "qwen2_5_vl",
                         engine=lambda cfg, location: Engine(RewritingLLM(location), SamplingParams))
    with pytest.raises(ValueError, match="tiny::test::txt0: vLLM's prompt ends in .* not the gold answer's ids"):
        scorer.score_examples([tiny_examples[1][0]])


def test_score_texts_and_generate_equal_the_transformers_scorer(tiny_checkpoint, tiny_examples):
    directory = tiny_checkpoint("qwen2_5_vl")
    reference, scorer = make_scorer(directory, "qwen2_5_vl"), vllm_scorer(directory, "qwen2_5_vl")
    texts = [tiny.LONG_TEXT, "Question: Is there a lesion?\nAnswer: yes\n", "short"]
    # A context shorter than LONG_TEXT: its windows carry context over, each token scored once.
    expected = reference.score_texts(texts, context_length=24, stride=16, batch_size=2)
    np.testing.assert_allclose(scorer.score_texts(texts, context_length=24, stride=16, batch_size=2), expected,
                               rtol=0, atol=1e-3)
    examples = [tiny_examples[0][1], tiny_examples[1][2]]
    assert scorer.generate(examples, max_new_tokens=4) == reference.generate(examples, max_new_tokens=4)


@pytest.mark.parametrize(("overrides", "message"), [
    (["model=blip2", "model.backend=vllm"], "model.backend=vllm: family 'blip2' cannot be scored through vLLM"),
    (["model=qwen2_5_vl", "model.backend=vllm", "model.device_map=auto"], "leave device_map null with backend=vllm"),
])
def test_a_model_vllm_cannot_serve_is_refused_before_any_work(overrides, message):
    with pytest.raises(ConfigRangeError, match=message):
        validate(compose(overrides))


def test_vllm_configs_of_the_served_families_validate():
    for model in ("qwen2_5_vl", "llava_onevision", "internvl3", "medgemma"):
        validate(compose([f"model={model}", "model.backend=vllm"]))


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_load_scorer_routes_to_vllm_and_names_the_extra_when_it_is_missing(tiny_checkpoint, tmp_path):
    cfg = model_config("qwen2_5_vl", backend="vllm", pretrained=str(tiny_checkpoint("qwen2_5_vl")))
    with pytest.raises(ImportError, match=r"backend=vllm needs vLLM.*pip install 'medexp\[vllm\]'"):
        load_scorer(cfg, tmp_path)


def test_the_backend_keys_scores_only_away_from_transformers():
    # Every score cached before the backend existed keeps its key; vLLM's scores get their own.
    default = model_settings_key(model_config("qwen2_5_vl"))
    assert "backend" not in default
    vllm = model_settings_key(model_config("qwen2_5_vl", backend="vllm"))
    assert vllm == {**default, "backend": "vllm"}
