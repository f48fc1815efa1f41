"""adjust_pvalues against hand-computed Bonferroni and Benjamini-Hochberg values."""

import numpy as np
import pytest

from medexp.stats import adjust_pvalues

P = [0.01, 0.04, 0.03, 0.2]


def test_bonferroni_by_hand():
    np.testing.assert_allclose(adjust_pvalues(P, "bonferroni"), [0.04, 0.16, 0.12, 0.8], rtol=1e-12)
    np.testing.assert_allclose(adjust_pvalues([0.5, 0.3], "bonferroni"), [1.0, 0.6], rtol=1e-12)  # capped at 1


def test_benjamini_hochberg_by_hand():
    # Sorted: 0.01, 0.03, 0.04, 0.2 -> m p / rank = 0.04, 0.06, 0.0533, 0.2; the running minimum
    # from the largest rank down gives 0.04, 0.0533, 0.0533, 0.2; returned in input order.
    q = adjust_pvalues(P, "bh")
    np.testing.assert_allclose(q, [0.04, 0.16 / 3, 0.16 / 3, 0.2], rtol=1e-12)
    assert isinstance(q, np.ndarray) and q.dtype == np.float64


def test_audit_grid_bonferroni_values():
    # The controlled audit's 27-cell grid: p = 8e-4 -> 2.2e-2 and p = 2.8e-3 -> 7.6e-2.
    adjusted = adjust_pvalues([8e-4, 2.8e-3] + [0.5] * 25, "bonferroni")
    assert adjusted[0] == pytest.approx(0.0216) and adjusted[1] == pytest.approx(0.0756)


@pytest.mark.parametrize(
    ("p", "message"),
    [
        ([], "at least one"),
        ([[0.1, 0.2]], "1-d"),
        ([0.1, float("nan")], "NaN"),
        ([0.1, 1.5], r"\[0, 1\]"),
        ([-0.1], r"\[0, 1\]"),
    ],
)
def test_bad_input_is_named(p, message):
    with pytest.raises(ValueError, match=message):
        adjust_pvalues(p, "bh")


def test_unknown_method_lists_the_choices():
    with pytest.raises(ValueError, match=r"'holm'.*bonferroni.*bh"):
        adjust_pvalues(P, "holm")
