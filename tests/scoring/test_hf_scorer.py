"""HFScorer on a tiny random-weight LLaVA (built like the demo models) against manual forward passes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from medexp.benchmarks.base import Example
from medexp.config.schemas import DemoModelConfig, ModelConfig
from medexp.models.hf import HFScorer
from tests.manual_scoring import ATOL, assert_rows_close, chat_answer_scores, rows, text_logprob
from tests.scan_examples import QA, write_examples

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LONG_TEXT = "".join(f"Question: {q}\nAnswer: {a}\n" for q, a, _ in QA[:4])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(model directory, image examples, text-only examples)."""
    from transformers import LlavaForConditionalGeneration

    from medexp.demo.models import _build_config, _build_processor

    root = tmp_path_factory.mktemp("tiny_llava")
    images, texts = write_examples(root)
    demo_cfg = DemoModelConfig(hidden_size=32, vocab_size=300, image_size=32, num_layers=2)
    torch.manual_seed(0)
    processor = _build_processor(images + texts, demo_cfg)
    model = LlavaForConditionalGeneration(_build_config(processor, demo_cfg))
    with torch.no_grad():
        # Default init (std 0.02) gives near-uniform predictions in which context, padding or
        # position mistakes would hide below the tolerance; larger weights make them visible.
        for parameter in model.parameters():
            if parameter.dim() >= 2:
                parameter.normal_(0.0, 0.3)
    model_dir = root / "model"
    model.save_pretrained(model_dir)
    processor.save_pretrained(model_dir)
    return model_dir, images, texts


def make_scorer(model_dir: Path, batch_size: int = 4, **overrides) -> HFScorer:
    cfg = OmegaConf.structured(ModelConfig(name="tiny", batch_size=batch_size, device="cpu", **overrides))
    return HFScorer(cfg, str(model_dir))


@pytest.fixture(scope="module")
def scorer(tiny):
    return make_scorer(tiny[0], batch_size=1)


# ---------------------------------------------------------------------------- examples


def test_model_is_not_near_uniform(scorer, tiny):
    """Guard for the other tests: the random model's predictions depend strongly on the token."""
    frame = scorer.score_examples(tiny[1])
    values = np.concatenate([np.asarray(v) for v in frame["token_logprobs"]])
    assert values.std() > 0.5
    assert np.all(values < 0)


def test_answer_span_decodes_to_gold_answer(scorer, tiny):
    for example in tiny[1] + tiny[2]:
        ids, merged = scorer.answer_ids(scorer.prompt(example), example.answer)
        assert not merged
        assert len(ids) > 0
        assert scorer.tokenizer.decode(ids) == example.answer


def test_answer_ids_without_chat_template(tiny):
    scorer = make_scorer(tiny[0], use_chat_template=False)
    assert not scorer.use_chat
    example = tiny[2][1]
    prompt = scorer.prompt(example)
    assert prompt == example.question
    ids, merged = scorer.answer_ids(prompt, example.answer)
    assert not merged
    assert scorer.tokenizer.decode(ids) == " " + example.answer  # joined with a space


def test_answer_ids_boundary_merge_falls_back_to_the_answer_alone(tiny):
    # The prompt ends with a space, so there is no joiner, and BPE may fuse that space with the
    # answer's first letters ("Ġt"), changing the prompt's last token: the answer is then
    # tokenised on its own.
    scorer = make_scorer(tiny[0], use_chat_template=False, prompt_template="{question} ")
    base = tiny[2][2]
    prompt = scorer.prompt(base)
    assert prompt.endswith("? ")
    results = {answer: scorer.answer_ids(prompt, answer) for answer in ("the kidney", "the", "to the left", "yes")}
    merged = [answer for answer, (_, flag) in results.items() if flag]
    assert merged, "no candidate answer merged across the boundary; pick other candidates"
    for answer, (ids, _) in results.items():
        assert scorer.tokenizer.decode(ids).strip() == answer
    answer = merged[0]
    ids = results[answer][0]
    assert scorer.tokenizer.decode(ids) == answer
    example = Example(base.example_id, base.position, None, base.question, answer)
    frame = scorer.score_examples([example])
    assert bool(frame.loc[0, "boundary_merged"]) is True
    assert frame.loc[0, "n_answer_tokens"] == len(ids)


@pytest.mark.parametrize("kind,index", [("image", 0), ("image", 2), ("text", 1)])
def test_token_logprobs_match_manual_forward(scorer, tiny, kind, index):
    example = (tiny[1] if kind == "image" else tiny[2])[index]
    ids, logprobs, z = chat_answer_scores(scorer, example)
    row = rows(scorer.score_examples([example]))[0]
    assert scorer.tokenizer.decode(ids) == example.answer
    assert row["n_answer_tokens"] == len(ids) == len(row["token_logprobs"])
    np.testing.assert_allclose(row["token_logprobs"], logprobs, rtol=0, atol=ATOL)
    np.testing.assert_allclose(row["token_minkpp_z"], z, rtol=0, atol=ATOL)
    assert row["sum_logprob"] == pytest.approx(logprobs.sum(), abs=ATOL * len(ids))
    assert row["mean_logprob"] == pytest.approx(logprobs.mean(), abs=ATOL)
    assert row["position"] == example.position


def test_image_changes_the_score(scorer, tiny):
    """The image reaches the model: the same question and answer with another scan scores differently."""
    a = tiny[1][0]
    b = Example("t::test::swap", 0, tiny[1][3].image, a.question, a.answer)
    ra, rb = rows(scorer.score_examples([a, b]))
    assert np.max(np.abs(np.subtract(ra["token_logprobs"], rb["token_logprobs"]))) > 1e-3


@pytest.mark.parametrize("batch_size", [2, 3, 4])
def test_batched_equals_one_at_a_time(tiny, scorer, batch_size):
    examples = tiny[1]
    assert len({len(scorer.answer_ids(scorer.prompt(ex), ex.answer)[0]) for ex in examples[:4]}) > 1
    single = rows(scorer.score_examples(examples))
    batched = rows(make_scorer(tiny[0], batch_size=batch_size).score_examples(examples))
    assert [r["example_id"] for r in batched] == [ex.example_id for ex in examples]
    for a, b in zip(batched, single):
        assert_rows_close(a, b)


def test_score_does_not_depend_on_batch_companions(tiny):
    scorer = make_scorer(tiny[0], batch_size=2)
    x, short, long = tiny[1][1], tiny[1][0], tiny[1][3]  # companions with shorter/longer prompts
    with_short = rows(scorer.score_examples([x, short]))[0]
    with_long = rows(scorer.score_examples([x, long]))[0]
    second = rows(scorer.score_examples([long, x]))[1]
    assert_rows_close(with_short, with_long)
    assert_rows_close(with_short, second)
    alone = rows(scorer.score_examples([x]))[0]
    assert_rows_close(with_short, alone)


def test_text_only_and_mixed_batches_keep_input_order(tiny, scorer):
    images, texts = tiny[1], tiny[2]
    mixed = [texts[0], images[0], images[2], texts[1], images[1], texts[2], images[4]]
    single = {r["example_id"]: r for r in rows(scorer.score_examples(mixed))}
    for batch_size in (3, 4, 16):
        frame = make_scorer(tiny[0], batch_size=batch_size).score_examples(mixed)
        assert frame["example_id"].tolist() == [ex.example_id for ex in mixed]
        assert frame["position"].tolist() == [ex.position for ex in mixed]
        for row in rows(frame):
            assert_rows_close(row, single[row["example_id"]])


def test_score_frame_columns_and_types(scorer, tiny):
    frame = scorer.score_examples(tiny[2])
    assert list(frame.columns) == ["example_id", "position", "n_answer_tokens", "token_logprobs", "token_minkpp_z",
                                   "sum_logprob", "mean_logprob", "boundary_merged"]
    for row in rows(frame):
        assert len(row["token_logprobs"]) == len(row["token_minkpp_z"]) == row["n_answer_tokens"]
        assert row["sum_logprob"] == pytest.approx(sum(row["token_logprobs"]))
        assert np.isfinite(row["token_minkpp_z"]).all()


@pytest.mark.parametrize("with_image", [True, False])
def test_empty_answer_raises_naming_the_example(tiny, with_image):
    scorer = make_scorer(tiny[0], batch_size=4)
    source = tiny[1] if with_image else tiny[2]
    bad = Example("t::test::EMPTY-42", 99, source[0].image, "What is it?", "")
    with pytest.raises(ValueError, match="t::test::EMPTY-42"):
        scorer.score_examples([source[1], bad, source[2]])


def test_image_example_without_chat_template(tiny):
    scorer = make_scorer(tiny[0], use_chat_template=False)
    frame = scorer.score_examples([tiny[1][0]])
    assert frame.loc[0, "n_answer_tokens"] > 0


# ---------------------------------------------------------------------------- raw text


def text_ids(scorer: HFScorer, text: str) -> list[int]:
    return [scorer.tokenizer.bos_token_id] + scorer.tokenizer(text, add_special_tokens=False)["input_ids"]


def forward_logprobs(scorer: HFScorer, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = scorer.model(input_ids=torch.tensor([ids])).logits[0].double()
    return torch.log_softmax(logits, -1)


def manual_window_sum(scorer, text, context_length, stride):
    """Token t < context_length is scored in the first window [0, C); later tokens in the window
    starting at k * stride with k = (t - C) // stride + 1 (window k scores [C + (k-1)S, C + kS))."""
    ids = text_ids(scorer, text)
    cache = {}
    total = 0.0
    for t in range(1, len(ids)):
        start = 0 if t < context_length else ((t - context_length) // stride + 1) * stride
        end = min(start + context_length, len(ids))
        assert start < t < end
        if start not in cache:
            cache[start] = forward_logprobs(scorer, ids[start:end])
        total += cache[start][t - start - 1, ids[t]].item()
    return total


def test_score_texts_full_context_equals_plain_sum(scorer):
    texts = [LONG_TEXT, "Question: Is there a lesion?\nAnswer: yes\n", "short"]
    got = scorer.score_texts(texts, context_length=4096, stride=2048, batch_size=2)
    assert got.shape == (3,) and got.dtype == np.float64
    for value, text in zip(got, texts):
        assert value == pytest.approx(text_logprob(scorer.model, scorer.tokenizer, text), abs=1e-4)


def test_score_texts_window_covering_everything(scorer):
    length = len(text_ids(scorer, LONG_TEXT))
    assert length > 40
    full = scorer.score_texts([LONG_TEXT], context_length=4096, stride=10, batch_size=1)[0]
    exact = scorer.score_texts([LONG_TEXT], context_length=length, stride=3, batch_size=1)[0]
    assert exact == pytest.approx(full, abs=1e-4)
    # One token shorter forces a second window: the last token loses its first token of context.
    shorter = scorer.score_texts([LONG_TEXT], context_length=length - 1, stride=length - 2, batch_size=1)[0]
    assert shorter == pytest.approx(manual_window_sum(scorer, LONG_TEXT, length - 1, length - 2), abs=1e-4)
    assert abs(shorter - full) > 1e-4


@pytest.mark.parametrize("context_length,stride", [(16, 8), (16, 5), (10, 1), (24, 23), (7, 3)])
def test_score_texts_sliding_window_matches_manual(scorer, context_length, stride):
    texts = [LONG_TEXT, LONG_TEXT[: len(LONG_TEXT) // 3], "Answer: no\n"]
    got = scorer.score_texts(texts, context_length=context_length, stride=stride, batch_size=3)
    for value, text in zip(got, texts):
        assert value == pytest.approx(manual_window_sum(scorer, text, context_length, stride), abs=1e-4)
    # The window matters: truncated context changes the total for the long text.
    assert abs(got[0] - text_logprob(scorer.model, scorer.tokenizer, LONG_TEXT)) > 1e-3


def test_score_texts_independent_of_batch_size(scorer):
    texts = [LONG_TEXT, "Answer: no\n", LONG_TEXT[:200]]
    a = scorer.score_texts(texts, context_length=16, stride=6, batch_size=1)
    b = scorer.score_texts(texts, context_length=16, stride=6, batch_size=5)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-4)


class ContextFreeModel:
    """Every position predicts the same fixed distribution, so the total of a text is the sum of
    log q(token) over the tokens scored: a token scored twice or never shows up exactly."""

    def __init__(self, vocab: int):
        self.logits = torch.randn(vocab, generator=torch.Generator().manual_seed(5)) * 2
        self.log_q = torch.log_softmax(self.logits.double(), -1)

    def __call__(self, input_ids, attention_mask=None, **_):
        batch, width = input_ids.shape
        return SimpleNamespace(logits=self.logits.expand(batch, width, -1).clone())


def context_free_scorer(tiny, monkeypatch):
    scorer = make_scorer(tiny[0])
    fake = ContextFreeModel(len(scorer.tokenizer))
    monkeypatch.setattr(scorer, "model", fake)
    return scorer, fake


@pytest.mark.parametrize("context_length,stride", [(2, 1), (5, 2), (8, 7), (16, 5), (16, 15), (33, 10), (4096, 7)])
def test_score_texts_scores_every_token_exactly_once(tiny, monkeypatch, context_length, stride):
    scorer, fake = context_free_scorer(tiny, monkeypatch)
    texts = [LONG_TEXT, LONG_TEXT[:77], "x", ""]
    got = scorer.score_texts(texts, context_length=context_length, stride=stride, batch_size=4)
    for value, text in zip(got, texts):
        ids = text_ids(scorer, text)
        assert value == pytest.approx(sum(fake.log_q[i].item() for i in ids[1:]), abs=1e-4)


@pytest.mark.parametrize("context_length,stride", [(8, 0), (8, -1), (8, 9), (8, 8), (0, 0)])
def test_score_texts_rejects_bad_window(scorer, context_length, stride):
    with pytest.raises(ValueError, match="stride"):
        scorer.score_texts(["abc"], context_length=context_length, stride=stride, batch_size=1)
