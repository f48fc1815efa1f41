"""Claim conditions: the allowed language evaluates correctly; everything else is refused at parse time."""

from __future__ import annotations

import pytest

from medexp.report.conditions import Condition, ConditionError


@pytest.mark.parametrize(
    "text,values,expected",
    [
        ("p_value < 0.05", {"p_value": 0.049}, True),
        ("p_value < 0.05", {"p_value": 0.05}, False),
        ("p_value > 0.1 and flag == 0", {"p_value": 0.2, "flag": 0.0}, True),
        ("p_value > 0.1 and flag == 0", {"p_value": 0.2, "flag": 1.0}, False),
        ("p_value < 0.01 or q_bh < 0.05", {"p_value": 0.3, "q_bh": 0.04}, True),
        ("not flag == 1", {"flag": 0.0}, True),
        ("0.1 < p_value <= 0.5", {"p_value": 0.5}, True),
        ("0.1 < p_value <= 0.5", {"p_value": 0.1}, False),
        ("abs(a - b) < 0.01", {"a": 0.195, "b": 0.1923}, True),
        ("abs(a - b) < 0.01", {"a": 0.30, "b": 0.1923}, False),
        ("a >= 2 * b + 1", {"a": 5.0, "b": 2.0}, True),
        ("-a > 1", {"a": -3.0}, True),
        ("a / b > 1", {"a": 1.0, "b": 0.0}, True),  # +inf
        ("a / b > 1 or a / b <= 1", {"a": 0.0, "b": 0.0}, False),  # nan compares false both ways
        ("flag != 1", {"flag": 1.0}, False),
    ],
)
def test_conditions_evaluate_like_python_arithmetic(text, values, expected):
    assert Condition.parse(text).holds(values) is expected


def test_names_are_the_values_read():
    condition = Condition.parse("p_bonferroni < 0.05 and abs(baseline_blip2_p_value - p_value) > 0.1")
    assert condition.names == {"p_bonferroni", "baseline_blip2_p_value", "p_value"}
    assert "abs" not in condition.names
    with pytest.raises(KeyError, match="p_value"):
        condition.holds({"p_bonferroni": 0.01, "baseline_blip2_p_value": 0.3})


@pytest.mark.parametrize(
    "text,message",
    [
        ("__import__('os').system('true')", "not allowed"),
        ("p_value.real < 1", "not allowed"),
        ("values['p'] < 1", "not allowed"),
        ("max(p_value, 1) < 2", "not allowed"),
        ("abs(p_value, 1) < 2", "not allowed"),
        ("(lambda: 1)() == 1", "not allowed"),
        ("'text' == name", "not allowed"),
        ("p_value ** 2 < 1", "not allowed"),
        ("p_value in (1, 2)", "comparison In is not allowed"),
        ("p_value is None", "comparison Is is not allowed"),
        ("flag", "not a truth value"),
        ("p_value + 1", "not a truth value"),
        ("p_value <", "not a valid expression"),
        ("", "non-empty"),
        ("p_value < 1; import os", "not a valid expression"),
    ],
)
def test_anything_outside_the_language_is_refused_with_the_piece_named(text, message):
    with pytest.raises(ConditionError, match=message):
        Condition.parse(text)


def test_the_text_keeps_the_authors_form_with_whitespace_folded():
    assert Condition.parse(" p_value < 0.05\n   and flag == 1 ").text == "p_value < 0.05 and flag == 1"


def test_percentile_reads_a_rank_the_evaluator_supplies():
    condition = Condition.parse("percentile(acc) >= 0.5 and percentile(safe) < 0.5")
    assert condition.names == {"acc", "safe"} and condition.ranked == {"acc", "safe"}
    assert condition.holds({"acc": 10, "safe": 90, "percentile(acc)": 1.0, "percentile(safe)": 0.0})
    assert not condition.holds({"acc": 10, "safe": 90, "percentile(acc)": 1.0, "percentile(safe)": 0.5})
    with pytest.raises(KeyError, match=r"percentile\(acc\)"):
        condition.holds({"acc": 10, "safe": 90})
    for text in ("percentile(acc + 1) > 0", "percentile(acc, safe) > 0", "percentile() > 0"):
        with pytest.raises(ConditionError, match="percentile"):
            Condition.parse(text)


def test_percentile_ranks_share_ties_and_run_from_zero_to_one():
    from medexp.report.conditions import percentile_ranks

    assert percentile_ranks([30.0, 10.0, 20.0, 40.0]) == pytest.approx([2 / 3, 0, 1 / 3, 1])
    assert percentile_ranks([5.0, 5.0, 1.0]) == pytest.approx([0.75, 0.75, 0])  # ranks 2.5, 2.5, 1
    with pytest.raises(ValueError, match="two cells"):
        percentile_ranks([1.0])
