"""Shared-prefix scoring (model.shared_prefix) gives the plain path's scores, family by family, on
the tiny checkpoints; it computes fewer tokens, counts them, and stays out of the score-cache key."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from medexp.benchmarks.base import Example
from tests.manual_scoring import assert_rows_close, rows
from tests.models.conftest import make_scorer, model_config
from tests.models.tiny import FAMILIES

# float32 on the CPU: the cached and the whole-sequence passes round differently (measured ~2e-6).
ATOL = 1e-4


@pytest.fixture(scope="module")
def shared_examples(tiny_examples):
    """Several questions per image, shuffled among singletons and text-only examples: questions
    sharing their first words (a longer prefix), and the same prompt with two answers, as
    option_order's letters are asked. Images of different sizes give prefixes of different
    lengths, so prefix batches are padded."""
    images, texts = tiny_examples
    asked = {
        0: [("What modality is this scan?", "CT"), ("What organ is shown?", "the brain"),
            ("What is the plane of the scan?", "axial")],
        1: [("Is there a lesion?", "yes"), ("Where is the lesion?", "on the left side of the liver")],
        2: [("Pick one. A) CT B) MRI", "A"), ("Pick one. A) CT B) MRI", "B"), ("Which organ is shown?", "kidney")],
        3: [("How many lesions are visible?", "two"), ("How many lesions are visible in the upper part?", "two")],
    }
    examples = [Example(f"tiny::shared::{image}.{i}", 0, images[image].image, question, answer)
                for image, pairs in asked.items() for i, (question, answer) in enumerate(pairs)]
    examples += [images[4], *texts[:2]]  # an image asked once, and text only: they run whole
    order = np.random.default_rng(0).permutation(len(examples))
    return [Example(examples[k].example_id, position, examples[k].image, examples[k].question, examples[k].answer)
            for position, k in enumerate(order)]


@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("batch_size", [3, 16])
def test_shared_prefix_scores_equal_the_plain_path(tiny_checkpoint, shared_examples, name, batch_size):
    directory, family = tiny_checkpoint(name), FAMILIES[name].family
    plain = make_scorer(directory, family, batch_size=batch_size, shared_prefix=False)
    shared = make_scorer(directory, family, batch_size=batch_size)
    expected, got = rows(plain.score_examples(shared_examples)), rows(shared.score_examples(shared_examples))
    assert [row["example_id"] for row in got] == [ex.example_id for ex in shared_examples]
    for a, b in zip(got, expected):
        assert_rows_close(a, b, atol=ATOL)
    # Same examples, same inputs: the naive count is the plain path's, and the plain path
    # computes all of it; the shared path computes fewer (the images' prefixes once).
    assert plain.token_counts.computed == plain.token_counts.naive
    assert shared.token_counts.naive == plain.token_counts.naive
    assert shared.token_counts.computed < 0.8 * shared.token_counts.naive


def test_shared_prefix_counts_by_hand(tiny_checkpoint, tiny_examples):
    """Two questions on one image: the prefix (everything before the first differing token,
    image included) is computed once, the rest of each input once."""
    scorer = make_scorer(tiny_checkpoint("llava"), "generic")
    image = tiny_examples[0][0].image
    pair = [Example("a", 0, image, "Is there a lesion?", "yes"), Example("b", 1, image, "Is this a CT scan?", "no")]
    items = [scorer._prepare(ex) for ex in pair]
    ids = [scorer._encode([item])["input_ids"][0].tolist() for item in items]
    common = next(i for i, (x, y) in enumerate(zip(*ids)) if x != y)
    assert ids[0][:common].count(scorer.model.config.image_token_id) == 16  # the image is in the prefix
    scorer.score_examples(pair)
    whole = [len(i) + len(item.answer_ids) for i, item in zip(ids, items)]
    assert scorer.token_counts.naive == sum(whole)
    assert scorer.token_counts.computed == common + sum(n - common for n in whole)


@pytest.mark.parametrize("name", ["llava", "gemma3"])
def test_option_order_arms_share_each_whole_prompt(tiny_checkpoint, tiny_examples, name):
    """option_order asks one image two orders of the options, each once per letter: one prefix
    per prompt (everything but its last token) computes fewer tokens than one per image."""
    directory, family = tiny_checkpoint(name), FAMILIES[name].family
    image = tiny_examples[0][1].image
    arms = ["Is there a lesion?\nA) yes\nB) no\nAnswer with the letter.",
            "Is there a lesion?\nA) no\nB) yes\nAnswer with the letter."]
    asked = [Example(f"oo::{arm}::{letter}", 0, image, prompt, letter)
             for arm, prompt in enumerate(arms) for letter in "AB"]
    shared = make_scorer(directory, family)
    plain = make_scorer(directory, family, shared_prefix=False)
    for a, b in zip(rows(shared.score_examples(asked)), rows(plain.score_examples(asked))):
        assert_rows_close(a, b, atol=ATOL)
    items = [shared._prepare(ex) for ex in asked]
    prompts = [int(shared._encode([item])["attention_mask"].sum()) for item in items]
    assert shared.token_counts.naive == sum(n + len(item.answer_ids) for n, item in zip(prompts, items))
    # Each arm's prompt minus its last token once, then per letter that token and the answer.
    assert shared.token_counts.computed == (prompts[0] - 1) + (prompts[2] - 1) + sum(
        1 + len(item.answer_ids) for item in items)


def test_token_budget_batches_shared_prefixes_with_the_same_scores(tiny_checkpoint, shared_examples):
    directory = tiny_checkpoint("qwen2_5_vl")
    plain = rows(make_scorer(directory, "qwen2_5_vl", shared_prefix=False).score_examples(shared_examples))
    budgeted = make_scorer(directory, "qwen2_5_vl", token_budget=120)
    for a, b in zip(rows(budgeted.score_examples(shared_examples)), plain):
        assert_rows_close(a, b, atol=ATOL)


def test_switched_off_no_forward_pass_reuses_a_cache(tiny_checkpoint, shared_examples, monkeypatch):
    scorer = make_scorer(tiny_checkpoint("llava"), "generic", shared_prefix=False)
    calls = []
    original = scorer.model.forward
    monkeypatch.setattr(scorer.model, "forward", lambda *args, **kwargs: calls.append(kwargs) or original(*args,
                                                                                                          **kwargs))
    scorer.score_examples(shared_examples)
    assert calls and all(call.get("past_key_values") is None for call in calls)


def test_switch_is_not_part_of_the_score_cache_key():
    from medexp.models.keys import model_settings_key

    on, off = model_config("generic"), model_config("generic", shared_prefix=False)
    assert OmegaConf.select(on, "shared_prefix") is True
    assert model_settings_key(on) == model_settings_key(off)
    assert "shared_prefix" not in model_settings_key(on)


def test_q_former_families_say_why_they_cannot_share_a_prefix():
    from medexp.models.blip import Blip2Scorer, CheXagentScorer, InstructBlipScorer

    for scorer_class in (Blip2Scorer, InstructBlipScorer, CheXagentScorer):
        assert "Q-Former" in scorer_class.SHARED_PREFIX_UNSUPPORTED


def test_a_cell_reports_the_tokens_its_scorer_computed(tiny_checkpoint, shared_examples, monkeypatch, tmp_path):
    import medexp.models
    from medexp.benchmarks.base import Benchmark
    from medexp.evaluators.context import CellContext

    scorer = make_scorer(tiny_checkpoint("llava"), "generic")
    monkeypatch.setattr(medexp.models, "load_scorer", lambda model_cfg, cache_dir: scorer)
    cfg = OmegaConf.create({"model": OmegaConf.to_container(model_config("generic"))})
    ctx = CellContext(cfg, 0, Benchmark(name="tiny", examples=shared_examples), shared_examples, tmp_path)
    assert ctx.scoring_metrics() == {}  # model never loaded: every score came from the cache
    ctx.scorer().score_examples(shared_examples)
    metrics = ctx.scoring_metrics()
    assert metrics == {"tokens_naive": scorer.token_counts.naive, "tokens_computed": scorer.token_counts.computed,
                       "images_processed": scorer.token_counts.images_processed}
    assert 0 < metrics["tokens_computed"] < metrics["tokens_naive"]
