"""Ordering controls: hash, answer-length and Min-K%++ orders, their tie rule and the Spearman metric."""

from __future__ import annotations

import pytest
from scipy import stats

from medexp.controls import apply_control, order_spearman
from medexp.controls.ordering import order_by_values
from tests.controls.helpers import FakeScorer, examples, fake_context, sha1, spearman_by_hand

IDS = ["bench::0", "bench::1", "bench::2", "bench::3", "bench::4", "bench::5"]


def _ids(ordered):
    return [example.example_id for example in ordered]


def test_order_hash_sorts_by_sha1_of_the_id():
    expected = sorted(IDS, key=sha1)
    assert expected != IDS  # otherwise the test could not tell the order from the release order
    ctx = fake_context({"name": "order_hash", "kind": "order_hash"}, examples(IDS), FakeScorer({}), None)
    assert _ids(apply_control(ctx.cfg.control, ctx.examples, ctx.example_scores)) == expected


def test_ties_are_broken_by_sha1_of_the_id_not_by_position():
    values = {"bench::0": 2.0, "bench::1": 1.0, "bench::2": 1.0, "bench::3": 1.0, "bench::4": 0.0, "bench::5": 3.0}
    tied = sorted(["bench::1", "bench::2", "bench::3"], key=sha1)
    assert tied != ["bench::1", "bench::2", "bench::3"]  # position order would differ from the hash order
    expected = ["bench::4", *tied, "bench::0", "bench::5"]
    assert _ids(order_by_values(examples(IDS), values, "value")) == expected
    # The result does not depend on the order the examples come in.
    assert _ids(order_by_values(examples(IDS)[::-1], values, "value")) == expected


def test_order_by_values_rejects_missing_and_nan_values():
    with pytest.raises(ValueError, match="no answer token count for 1 examples"):
        order_by_values(examples(IDS[:2]), {"bench::0": 1.0}, "answer token count")
    with pytest.raises(ValueError, match="NaN or infinite for 1 examples"):
        order_by_values(examples(IDS[:2]), {"bench::0": 1.0, "bench::1": float("nan")}, "Min-K%++ score")


# Answer token counts and Min-K%++ z values per example.
ROWS = {
    "bench::0": (3, [0.5, -1.0, 2.0]),
    "bench::1": (1, [0.25]),
    "bench::2": (5, [-3.0, 1.0, 1.0, 1.0, 1.0]),
    "bench::3": (1, [0.75]),
    "bench::4": (10, [0.0, -2.0, -1.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0]),
    "bench::5": (3, [-1.0, 0.5, 0.5]),
}


def test_order_answer_len_sorts_shortest_first_from_the_cached_score_table(tmp_path):
    scorer = FakeScorer(ROWS)
    ctx = fake_context({"name": "order_answer_len", "kind": "order_answer_len"}, examples(IDS), scorer, tmp_path)
    one_token = sorted(["bench::1", "bench::3"], key=sha1)
    three_tokens = sorted(["bench::0", "bench::5"], key=sha1)
    assert _ids(apply_control(ctx.cfg.control, ctx.examples, ctx.example_scores)) == [*one_token, *three_tokens, "bench::2", "bench::4"]
    # The model scored the released order once; a second application reads the cache.
    assert [_ids(call) for call in scorer.calls] == [IDS]
    assert _ids(apply_control(ctx.cfg.control, ctx.examples, ctx.example_scores)) == [*one_token, *three_tokens, "bench::2", "bench::4"]
    assert len(scorer.calls) == 1


def test_order_mink_sorts_by_the_mean_of_the_lowest_k_percent_of_z(tmp_path):
    # K = 20%: floor(20% of n tokens), at least one. Scores by hand:
    # bench::0 (3 tokens -> 1): -1.0   bench::1: 0.25   bench::2 (5 -> 1): -3.0   bench::3: 0.75
    # bench::4 (10 -> 2): mean(-2, -1) = -1.5   bench::5 (3 -> 1): -1.0 (ties with bench::0)
    ctx = fake_context({"name": "order_mink", "kind": "order_mink", "k_percent": 20.0}, examples(IDS),
                       FakeScorer(ROWS), tmp_path)
    tie = sorted(["bench::0", "bench::5"], key=sha1)
    assert _ids(apply_control(ctx.cfg.control, ctx.examples, ctx.example_scores)) == ["bench::2", "bench::4", *tie, "bench::1", "bench::3"]
    # K = 50%: bench::4 -> mean of its 5 lowest = (-2 - 1 + 0 + 4 + 4) / 5 = 1.0; bench::2 -> mean(-3, 1) = -1.0
    ctx.cfg.control.k_percent = 50.0
    ordered = _ids(apply_control(ctx.cfg.control, ctx.examples, ctx.example_scores))
    assert ordered.index("bench::2") < ordered.index("bench::1") < ordered.index("bench::3") < ordered.index("bench::4")


def test_released_order_controls_keep_the_examples(tmp_path):
    released = examples(IDS)
    for kind in ("none", "external_baseline", "negative_images"):
        ctx = fake_context({"name": kind, "kind": kind}, released, FakeScorer({}), tmp_path)
        assert apply_control(ctx.cfg.control, ctx.examples, ctx.example_scores) == released


def test_order_spearman_against_hand_computed_values():
    released = examples(IDS[:4])
    assert order_spearman(released) == 1.0
    assert order_spearman(released[::-1]) == pytest.approx(-1.0)
    swapped = [released[i] for i in (1, 0, 3, 2)]  # d = 1 everywhere: 1 - 6*4 / (4*15) = 0.6
    assert order_spearman(swapped) == pytest.approx(0.6)
    hashed = sorted(examples(IDS), key=lambda ex: sha1(ex.example_id))
    assert order_spearman(hashed) == pytest.approx(spearman_by_hand([ex.position for ex in hashed]))
    assert order_spearman(hashed) == pytest.approx(stats.spearmanr([ex.position for ex in hashed], range(6)).statistic)
    assert order_spearman(released[:1]) == 1.0


def test_order_spearman_uses_ranks_of_positions_with_gaps():
    """Positions need not be 0..n-1 (rows skipped for a bad image leave gaps)."""
    gapped = [ex.__class__(ex.example_id, position, ex.image, ex.question, ex.answer)
              for ex, position in zip(examples(IDS[:3]), (0, 7, 40))]
    assert order_spearman([gapped[2], gapped[0], gapped[1]]) == pytest.approx(spearman_by_hand([40, 0, 7]))
