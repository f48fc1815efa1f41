"""The contract every chat-template family adapter satisfies, checked on its tiny checkpoint.

A family's test module subclasses :class:`ScorerContract` and sets ``FAMILY``, ``MODEL_CLASS``
and ``END_TOKEN`` (the chat template's end-of-turn token, which must never be scored).
"""

from __future__ import annotations

import numpy as np
import pytest

from medexp.benchmarks.base import Example
from tests.manual_scoring import ATOL, assert_rows_close, chat_answer_scores, rows, text_logprob
from tests.models import tiny
from tests.models.conftest import make_scorer


class SidedProcessor:
    """The processor, padding every batch on a given side."""

    def __init__(self, processor, side: str):
        self.processor, self.side, self.calls = processor, side, []

    def __call__(self, **kwargs):
        encoded = self.processor(**kwargs, padding_side=self.side)
        self.calls.append(encoded)
        return encoded

    def __getattr__(self, name):
        return getattr(self.processor, name)


class ScorerContract:
    FAMILY: str
    MODEL_CLASS: str
    END_TOKEN: str

    @pytest.fixture(scope="class")
    def checkpoint(self, tiny_checkpoint):
        return tiny_checkpoint(self.FAMILY)

    @pytest.fixture(scope="class")
    def scorer(self, checkpoint):
        return make_scorer(checkpoint, self.FAMILY, batch_size=1)

    @pytest.fixture(scope="class")
    def examples(self, tiny_examples):
        return tiny_examples

    # ------------------------------------------------------------------ loading

    def test_loads_the_family_class_without_remote_code(self, checkpoint, monkeypatch):
        import transformers

        calls = []
        for owner in (transformers.AutoProcessor, getattr(transformers, self.MODEL_CLASS)):
            original = owner.from_pretrained
            monkeypatch.setattr(owner, "from_pretrained",
                                lambda *args, _original=original, **kwargs: calls.append(kwargs) or _original(*args,
                                                                                                             **kwargs))
        scorer = make_scorer(checkpoint, self.FAMILY)
        assert type(scorer.model).__name__ == self.MODEL_CLASS
        assert len(calls) == 2
        assert all(call["trust_remote_code"] is False for call in calls)

    def test_model_is_not_near_uniform(self, scorer, examples):
        """Guard for the other tests: predictions depend strongly on the token."""
        values = np.concatenate([np.asarray(v) for v in scorer.score_examples(examples[0])["token_logprobs"]])
        assert values.std() > 0.5 and np.all(values < 0)

    # ------------------------------------------------------------------ answer span

    def test_answer_span_decodes_to_gold_answer_and_excludes_end_tokens(self, scorer, examples):
        end_id = scorer.tokenizer.convert_tokens_to_ids(self.END_TOKEN)
        for example in examples[0] + examples[1]:
            prompt = scorer.prompt(example)
            assert self.END_TOKEN in prompt  # the user turn is closed before the answer
            ids, merged = scorer.answer_ids(prompt, example.answer)
            assert not merged
            assert scorer.tokenizer.decode(ids) == example.answer
            assert end_id not in ids

    @pytest.mark.parametrize("kind,index", [("image", 0), ("image", 2), ("image", 4), ("text", 1)])
    def test_token_logprobs_match_manual_forward(self, scorer, examples, kind, index):
        example = examples[0 if kind == "image" else 1][index]
        ids, logprobs, z = chat_answer_scores(scorer, example)
        row = rows(scorer.score_examples([example]))[0]
        assert scorer.tokenizer.decode(ids) == example.answer
        assert row["n_answer_tokens"] == len(ids)
        np.testing.assert_allclose(row["token_logprobs"], logprobs, rtol=0, atol=ATOL)
        np.testing.assert_allclose(row["token_minkpp_z"], z, rtol=0, atol=ATOL)
        assert row["sum_logprob"] == pytest.approx(logprobs.sum(), abs=ATOL * len(ids))

    def test_image_reaches_the_model(self, scorer, examples):
        a = examples[0][0]
        b = Example("tiny::test::swap", 0, examples[0][3].image, a.question, a.answer)
        ra, rb = rows(scorer.score_examples([a, b]))
        assert np.max(np.abs(np.subtract(ra["token_logprobs"], rb["token_logprobs"]))) > 1e-3

    # ------------------------------------------------------------------ batching

    @pytest.mark.parametrize("batch_size", [2, 3, 8])
    def test_batched_equals_one_at_a_time(self, scorer, checkpoint, examples, batch_size):
        mixed = [examples[1][0], *examples[0][:3], examples[1][1], *examples[0][3:], examples[1][2]]
        single = rows(scorer.score_examples(mixed))
        batched = rows(make_scorer(checkpoint, self.FAMILY, batch_size=batch_size).score_examples(mixed))
        assert [r["example_id"] for r in batched] == [ex.example_id for ex in mixed]
        for a, b in zip(batched, single):
            assert_rows_close(a, b)

    def test_vocabulary_projection_of_answer_positions_only_gives_the_full_logits_scores(self, checkpoint, examples,
                                                                                          monkeypatch):
        """The model projects only the positions that predict answer tokens onto the vocabulary
        (logits_to_keep), with the scores of a forward that ignores logits_to_keep and projects
        every position."""
        mixed = examples[0] + examples[1]
        projected = {"kept": [], "full": []}
        frames = {}
        for path in projected:
            scorer = make_scorer(checkpoint, self.FAMILY, batch_size=len(mixed))
            if path == "full":
                forward = scorer.model.forward
                monkeypatch.setattr(scorer.model, "forward",
                                    lambda *args, logits_to_keep=0, **kwargs: forward(*args, **kwargs))
            head = scorer.model.get_output_embeddings()
            hook = head.register_forward_hook(lambda module, args, output, path=path:
                                              projected[path].append(args[0].shape[:-1].numel()))
            frames[path] = rows(scorer.score_examples(mixed))
            hook.remove()
        # The positions any row needs, for every row (a 1-D logits_to_keep, which every transformers
        # version takes): at least the answer tokens, far fewer than every position.
        assert sum(projected["kept"]) >= sum(row["n_answer_tokens"] for row in frames["kept"])
        assert sum(projected["full"]) > 2 * sum(projected["kept"])  # prompts and padding were projected too
        for kept, full in zip(frames["kept"], frames["full"]):
            assert_rows_close(kept, full)

    @pytest.mark.parametrize("side", ["left", "right"])
    def test_score_does_not_depend_on_companions_or_padding_side(self, checkpoint, examples, side):
        scorer = make_scorer(checkpoint, self.FAMILY, batch_size=3)
        # The shortest input among the longest two: companions with more tokens pad its row.
        by_length = sorted(examples[0], key=lambda ex: scorer._input_length(scorer._prepare(ex)))
        target, companions = by_length[0], by_length[-2:]
        sided = SidedProcessor(scorer.processor, side)
        scorer.processor = sided
        alone = rows(scorer.score_examples([target]))[0]
        among = {r["example_id"]: r for r in rows(scorer.score_examples([companions[0], target, companions[1]]))}
        assert_rows_close(among[target.example_id], alone)
        padded = sided.calls[-1]["attention_mask"][1]
        assert not padded.all(), "the target row was not padded; pick longer companions"
        assert padded[0 if side == "left" else -1] == 0  # padding really is on that side

    # ------------------------------------------------------------------ text only

    def test_score_texts_equals_manual_and_is_batch_independent(self, scorer):
        texts = [tiny.LONG_TEXT, "Question: Is there a lesion?\nAnswer: yes\n", "short"]
        one = scorer.score_texts(texts, context_length=4096, stride=2048, batch_size=1)
        three = scorer.score_texts(texts, context_length=4096, stride=2048, batch_size=3)
        for value, text in zip(one, texts):
            assert value == pytest.approx(text_logprob(scorer.model, scorer.tokenizer, text), abs=1e-4)
        np.testing.assert_allclose(three, one, rtol=0, atol=1e-4)
