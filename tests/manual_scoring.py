"""Reference scores computed by hand, without adapter code, for the scorer tests of every model
family: answer log-probabilities and Min-K%++ z from one teacher-forced forward pass, the log
probability of a plain text, and the comparison of two score rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from medexp.benchmarks.base import Example

ATOL = 1e-5


def open_rgb(path: Path) -> Image.Image:
    with Image.open(path) as image:
        return image.convert("RGB")


def answer_scores(logits: torch.Tensor, ids: torch.Tensor, prompt_ids: torch.Tensor):
    """Answer token ids, their log p and their Min-K%++ z, from the logits (positions x vocabulary)
    of one forward pass over ``ids``: the prompt's tokens ``prompt_ids`` followed by the answer's.

    Position t - 1 predicts token t. With p that next-token distribution,
    z_t = (log p(x_t) - mu) / sigma, mu = sum p log p, sigma^2 = sum p (log p)^2 - mu^2.
    """
    n_prompt = len(prompt_ids)
    assert torch.equal(ids[:n_prompt], prompt_ids), "prompt + answer does not start with the prompt's tokens"
    assert len(logits) == len(ids), "the logits do not cover exactly the scored sequence"
    log_p = torch.log_softmax(logits.double(), dim=-1)
    positions = range(n_prompt, len(ids))
    logprobs = np.array([log_p[t - 1, ids[t]].item() for t in positions])
    p = log_p.exp()
    mu = (p * log_p).sum(-1)
    sigma = ((p * log_p**2).sum(-1) - mu**2).sqrt()
    z = np.array([((log_p[t - 1, ids[t]] - mu[t - 1]) / sigma[t - 1]).item() for t in positions])
    return ids[n_prompt:].tolist(), logprobs, z


def chat_answer_scores(scorer, example: Example):
    """:func:`answer_scores` of an example through the processor and its chat template: one
    unbatched forward pass of the chat prompt (an image slot first if the example has an image)
    followed directly by the answer."""
    processor = scorer.processor
    content = ([{"type": "image"}] if example.image is not None else []) + [{"type": "text", "text": example.question}]
    prompt = processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                           tokenize=False)
    kwargs = {"return_tensors": "pt", "add_special_tokens": False}
    if example.image is not None:
        kwargs["images"] = [[open_rgb(example.image)]]
    prompt_ids = processor(text=[prompt], **kwargs)["input_ids"][0]
    full = processor(text=[prompt + example.answer], **kwargs)
    with torch.no_grad():
        logits = scorer.model(**full).logits[0]
    return answer_scores(logits, full["input_ids"][0], prompt_ids)


def text_logprob(language_model, tokenizer, text: str) -> float:
    """Sum of log p(x_t | x_<t) of a text (after the tokenizer's BOS, if it has one) scored on its
    own, without image or template, in one forward pass."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if tokenizer.bos_token_id is not None:
        ids = [tokenizer.bos_token_id] + ids
    with torch.no_grad():
        log_p = torch.log_softmax(language_model(input_ids=torch.tensor([ids])).logits[0].double(), -1)
    return sum(log_p[t - 1, ids[t]].item() for t in range(1, len(ids)))


def assert_rows_close(a: dict, b: dict, atol: float = ATOL) -> None:
    """Two score rows of the same example agree: identity, answer length and token scores."""
    assert a["example_id"] == b["example_id"]
    assert a["position"] == b["position"]
    assert a["n_answer_tokens"] == b["n_answer_tokens"]
    np.testing.assert_allclose(a["token_logprobs"], b["token_logprobs"], rtol=0, atol=atol)
    np.testing.assert_allclose(a["token_minkpp_z"], b["token_minkpp_z"], rtol=0, atol=atol)
    assert a["sum_logprob"] == pytest.approx(b["sum_logprob"], abs=atol * a["n_answer_tokens"])


def rows(frame) -> list[dict]:
    """The rows of a score frame, as dicts."""
    return frame.to_dict("records")
