"""Detector codec: gains by hand, the in-context items it scores, the null (p uniform over drawn
worlds) and power (members that gain less from in-context examples are detected)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from medexp.benchmarks.base import Example
from medexp.detectors import codec_detector
from medexp.evaluators.dataset_tests import with_in_context_examples
from tests.detectors.score_tables import codec_config


def tables(ids, alone, in_context):
    return (pd.DataFrame({"example_id": ids, "mean_logprob": alone}),
            pd.DataFrame({"example_id": ids, "mean_logprob": in_context}))


def drawn(seed: int, n: int, member_shift: float = 0.0):
    """Alone and in-context scores of n members and n non-members; gains share one distribution
    except the members' shift."""
    rng = np.random.default_rng(seed)
    out = []
    for prefix, shift in (("m", member_shift), ("n", 0.0)):
        alone = -rng.exponential(1.0, n)
        gain = rng.normal(0.3, 0.5, n) - shift
        out += tables([f"{prefix}{i}" for i in range(n)], alone, alone + gain)
    return out


def test_gains_and_test_by_hand():
    members = tables(["m0", "m1", "m2"], [-1.0, -0.5, -2.0], [-1.5, -0.5, -1.0])  # gains -0.5, 0, +1.0
    nonmembers = tables(["n0", "n1"], [-1.0, -1.0], [-0.5, 0.0])  # gains +0.5, +1.0
    result = codec_detector(*members, *nonmembers, codec_config())
    assert result.table["gain"].tolist() == pytest.approx([-0.5, 0.0, 1.0, 0.5, 1.0])
    # P(non-member gain > member gain): 0.5 beats -0.5, 0 (2); 1.0 beats -0.5, 0, ties 1.0 (2.5): 4.5 / 6
    assert result.metrics["statistic"] == pytest.approx(4.5 / 6)
    assert result.metrics["p_value"] == pytest.approx(
        sps.mannwhitneyu([0.5, 1.0], [-0.5, 0.0, 1.0], alternative="greater").pvalue)
    assert result.metrics["drop_share_members"] == pytest.approx(1 / 3) and result.metrics["drop_share_nonmembers"] == 0
    assert result.metrics["gain_mean_members"] == pytest.approx(1 / 6)


def test_tables_of_other_examples_are_refused():
    alone, _ = tables(["a", "b"], [-1.0, -1.0], [-1.0, -1.0])
    _, other = tables(["b", "a"], [-1.0, -1.0], [-1.0, -1.0])
    with pytest.raises(ValueError, match="same examples in the same order"):
        codec_detector(alone, other, alone, alone, codec_config())


def test_null_p_is_uniform():
    p_values = np.array([codec_detector(*drawn(seed, 40), codec_config()).metrics["p_value"] for seed in range(200)])
    rejections = int(np.sum(p_values < 0.05))
    assert sps.binomtest(rejections, 200, 0.05).pvalue > 0.001, rejections
    assert sps.kstest(p_values, "uniform").pvalue > 0.001


def test_power_members_that_gain_less_are_detected():
    results = [codec_detector(*drawn(500 + seed, 100, member_shift=0.3), codec_config()) for seed in range(20)]
    assert np.mean([r.metrics["flag"] for r in results]) >= 0.9
    assert all(r.metrics["gain_mean_members"] < r.metrics["gain_mean_nonmembers"] for r in results)


def test_each_item_is_scored_after_others_of_its_split():
    examples = [Example(f"e{i}", i, None, f"q{i}?", f"a{i}") for i in range(6)]
    derived = with_in_context_examples(examples, 3, "Q: {question} A: {answer}\n", np.random.default_rng(0))
    for example, item in zip(examples, derived):
        context, _, question = item.question.rpartition("\n")
        shown = [line.split()[1] for line in context.split("\n")]
        assert question == example.question and len(set(shown)) == 3 and example.question not in shown
        assert (item.example_id, item.answer, item.image, item.position) == (example.example_id, example.answer, None, example.position)
    again = with_in_context_examples(examples, 3, "Q: {question} A: {answer}\n", np.random.default_rng(0))
    assert [item.question for item in again] == [item.question for item in derived]
    with pytest.raises(ValueError, match="needs more than 6 examples"):
        with_in_context_examples(examples, 6, "Q: {question} A: {answer}\n", np.random.default_rng(0))
