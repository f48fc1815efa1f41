"""Conformal p-values against the non-members: by hand, super-uniform under exchangeability (with
and without ties), and Benjamini-Hochberg over them by hand and by simulation."""

from __future__ import annotations

import numpy as np
import pytest

from medexp.stats.conformal import conformal_discoveries, conformal_pvalues

REFERENCE = np.arange(10.0)  # non-member scores 0, 1, ..., 9
SCORES = np.array([20.0, 15.0, 9.5, 9.0, 5.0, -1.0])


def test_conformal_p_by_hand_ties_count_against_the_item():
    # non-members at or above each score: 0, 0, 0, 1 (the tie at 9), 5 (5..9), 10 -> (1 + k) / 11
    assert conformal_pvalues(SCORES, REFERENCE).tolist() == pytest.approx([1 / 11, 1 / 11, 1 / 11, 2 / 11, 6 / 11, 1.0])


def test_bh_discoveries_by_hand():
    # sorted p 1/11, 1/11, 1/11, 2/11, 6/11, 1 -> m p / rank = 6/11, 3/11, 2/11, 3/11, 36/55, 1 ->
    # running minimum from the top: q = 2/11, 2/11, 2/11, 3/11, 36/55, 1
    found = conformal_discoveries(SCORES, REFERENCE, fdr=0.2)
    assert found.q_values.tolist() == pytest.approx([2 / 11, 2 / 11, 2 / 11, 3 / 11, 36 / 55, 1.0])
    assert found.discovered.tolist() == [True, True, True, False, False, False]
    assert conformal_discoveries(SCORES, REFERENCE, fdr=0.3).discovered.sum() == 4
    assert conformal_discoveries(SCORES, REFERENCE, fdr=0.1).discovered.sum() == 0  # 1/11 x 6 > 0.1 at rank 1


@pytest.mark.parametrize("discrete", [False, True], ids=["continuous", "ties"])
def test_exchangeable_items_get_super_uniform_p_values(discrete):
    """One item and 19 non-members from one distribution, 20,000 times: P(p <= t) <= t within
    Monte Carlo error; continuous scores reach floor(20 t) / 20 exactly (the test is not
    needlessly conservative), tied scores (Poisson counts) stay below it."""
    rng = np.random.default_rng(7)
    draws = rng.poisson(2.0, size=(20_000, 20)).astype(float) if discrete else rng.normal(size=(20_000, 20))
    p = np.array([conformal_pvalues(row[:1], row[1:])[0] for row in draws])
    for t in (0.05, 0.1, 0.2, 0.5):
        rate = np.mean(p <= t)
        se = np.sqrt(t * (1 - t) / p.size)
        assert rate <= t + 3 * se, (t, rate)
        if not discrete:
            assert abs(rate - np.floor(20 * t + 1e-9) / 20) < 4 * se, (t, rate)
    if discrete:
        assert np.mean(p <= 0.2) < 0.2 - 3 * np.sqrt(0.16 / p.size)  # ties counted against the item


def test_bh_over_conformal_p_values_controls_the_fdr_and_finds_shifted_items():
    """300 worlds: 200 non-members, 30 exchangeable members and 20 shifted by +3 standard deviations;
    the mean false-discovery proportion at FDR 0.1 stays below 0.1 within Monte Carlo error."""
    rng = np.random.default_rng(11)
    proportions, found = [], []
    for _ in range(300):
        shifted = np.r_[np.zeros(30, bool), np.ones(20, bool)]
        scores = rng.normal(size=50) + 3.0 * shifted
        discovered = conformal_discoveries(scores, rng.normal(size=200), fdr=0.1).discovered
        proportions.append((discovered & ~shifted).sum() / max(1, discovered.sum()))
        found.append((discovered & shifted).sum() / 20)
    assert np.mean(proportions) <= 0.1 + 3 * np.std(proportions) / np.sqrt(300)
    assert np.mean(found) > 0.5


def test_conformal_inputs_are_checked():
    with pytest.raises(ValueError, match="non-empty"):
        conformal_pvalues([1.0], [])
    with pytest.raises(ValueError, match="finite"):
        conformal_pvalues([np.nan], [1.0])
    with pytest.raises(ValueError, match="fdr"):
        conformal_discoveries([1.0], [0.0], fdr=1.0)
