"""``python -m medexp.inspect model=<name> --prompt``: a checkpoint's prompt and token counts from
its processor alone, checked on tiny checkpoints built with the published processing."""

from __future__ import annotations

import json

import pytest

from medexp import inspect
from tests.models import tiny_blip as tb
from tests.models.test_published_processing import QUESTION, SIDE, qwen_image_tokens, write_image
from tests.models.tiny import published_settings


def run(capsys, *args) -> tuple[int, dict | None, str]:
    status = inspect.main(list(args))
    out, err = capsys.readouterr()
    return status, (json.loads(out) if status == 0 else None), err


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    return write_image(tmp_path_factory.mktemp("preview") / "scan.png", SIDE, SIDE)


def no_weights(monkeypatch, *classes):
    """Make loading the weights of these transformers classes fail: the command must not need them."""
    import transformers

    for name in classes:
        monkeypatch.setattr(getattr(transformers, name), "from_pretrained",
                            classmethod(lambda cls, *args, **kwargs: pytest.fail(f"{cls.__name__} weights loaded")))


def test_qwen2_5_vl_prompt_and_counts_without_weights(tiny_checkpoint, image, capsys, monkeypatch):
    no_weights(monkeypatch, "Qwen2_5_VLForConditionalGeneration", "AutoModelForImageTextToText")
    directory = tiny_checkpoint("qwen2_5_vl_published")
    status, summary, err = run(capsys, "model=qwen2_5_vl", f"model.pretrained={directory}", "--prompt",
                               f"--image={image}")
    assert status == 0, err
    tokens = qwen_image_tokens(SIDE, SIDE, published_settings("qwen2_5_vl")["preprocessor_config"])
    assert summary["prompt"].endswith(f"<|vision_start|><|image_pad|><|vision_end|>{QUESTION}<|im_end|>\n"
                                      "<|im_start|>assistant\n")
    assert summary["image_tokens"] == tokens and summary["image_tokens_prepended_by_model"] == 0
    assert summary["chat_template"] is True and summary["processor"] == "Qwen2_5_VLProcessor"
    assert summary["prompt_tokens"] == summary["text_tokens"] + tokens
    assert summary["total_tokens"] == summary["prompt_tokens"] + summary["n_answer_tokens"]
    assert f"<|image_pad|>×{tokens}" in summary["prompt_tokens_decoded"]
    assert "".join(summary["answer_tokens"]) == "CT" and not summary["boundary_merged"]


def test_default_example_is_a_512_square_with_a_slake_question(tiny_checkpoint, capsys):
    directory = tiny_checkpoint("qwen2_5_vl_published")
    status, summary, err = run(capsys, "model=qwen2_5_vl", f"model.pretrained={directory}", "--prompt",
                               "--answer=MRI")
    assert status == 0, err
    assert summary["question"] == QUESTION and summary["answer"] == "MRI"
    assert summary["image_tokens"] == qwen_image_tokens(SIDE, SIDE, published_settings("qwen2_5_vl")["preprocessor_config"])


def test_blip2_counts_its_query_placeholders(tmp_path, image, capsys, monkeypatch):
    directory = tb.build_blip2(tmp_path / "blip2", published="blip2")
    no_weights(monkeypatch, "Blip2ForConditionalGeneration", "AutoModelForImageTextToText")
    status, summary, err = run(capsys, "model=blip2", f"model.pretrained={directory}", "--prompt", f"--image={image}")
    assert status == 0, err
    assert summary["prompt"] == f"Question: {QUESTION} Answer:" and summary["chat_template"] is False
    assert summary["image_tokens"] == published_settings("blip2")["processor_config"]["num_query_tokens"] == 32


def test_remote_code_queries_are_counted_as_prepended(tmp_path, image, capsys):
    """A remote-code BLIP-2 descendant (CheXagent's layout) writes no query placeholders: its
    queries are counted from the config, as the model prepends them inside forward."""
    plain = tb.build_blip2(tmp_path / "plain", language_model="mistral")
    remote = tb.build_remote_standin(tmp_path / "remote", plain)
    status, summary, err = run(capsys, "model=chexagent", f"model.pretrained={remote}", "--prompt", f"--image={image}")
    assert status == 0, err
    assert summary["image_tokens_prepended_by_model"] == summary["image_tokens"] == tb.NUM_QUERY_TOKENS
    assert summary["total_tokens"] == summary["prompt_tokens"] + tb.NUM_QUERY_TOKENS + summary["n_answer_tokens"]


def test_usage_errors(capsys):
    status, _, err = run(capsys, "--prompt")
    assert status == 2 and "model=<name>" in err
    status, _, err = run(capsys, "model=qwen2_5_vl", "--prompt", "--join=x.csv")
    assert status == 2 and "--join is not an option of --prompt" in err
