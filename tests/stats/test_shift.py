"""The distribution-shift control: an inputs-only classifier that cannot separate members and
non-members drawn alike (null) and does separate a vocabulary, length or image-statistics shift
(power); features and folds by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from medexp.stats.shift import ShiftInputs, input_features, shift_test

WORDS = np.array([f"word{i}" for i in range(40)])
LABELS = np.r_[np.ones(60, bool), np.zeros(60, bool)]


def _texts(rng, vocabulary: np.ndarray, count: int, length: int = 8) -> list[str]:
    return [" ".join(rng.choice(vocabulary, size=length)) for _ in range(count)]


def _test(inputs: ShiftInputs, labels=LABELS, permutations: int = 199, seed: int = 0):
    return shift_test(inputs, labels, n_folds=5, n_permutations=permutations, n_bootstrap=200, level=0.95, seed=seed)


@pytest.mark.extended
def test_inputs_drawn_alike_give_chance_auc_and_uniform_p_values():
    """40 worlds of 40 examples whose texts come from one vocabulary: the cross-validated AUC sits
    near 0.5 and the permutation p-values are uniform (p floor 1/25)."""
    p_values, aucs = [], []
    labels = np.r_[np.ones(20, bool), np.zeros(20, bool)]
    for seed in range(40):
        rng = np.random.default_rng(seed)
        result = _test(ShiftInputs(_texts(rng, WORDS, 40, length=6)), labels, permutations=24, seed=seed)
        p_values.append(result.p_value)
        aucs.append(result.auc)
    assert abs(np.mean(aucs) - 0.5) < 0.05
    assert sps.binomtest(int(np.sum(np.asarray(p_values) <= 0.2)), 40, 0.2).pvalue > 0.001
    assert sps.kstest(p_values, "uniform").pvalue > 0.001


@pytest.mark.parametrize("shift", ["vocabulary", "length", "images"])
def test_a_shifted_pair_is_told_apart(shift):
    """Non-members from another source: a partly different vocabulary, longer texts, or the same
    texts with brighter images (numeric columns only): AUC far above 0.5, p at its floor 1/200."""
    rng = np.random.default_rng(3)
    numeric = None
    if shift == "vocabulary":
        texts = _texts(rng, WORDS[:30], 60) + _texts(rng, WORDS[10:], 60)
    elif shift == "length":
        texts = _texts(rng, WORDS, 60, length=4) + _texts(rng, WORDS, 60, length=16)
    else:
        texts = _texts(rng, WORDS, 120)
        numeric = np.c_[rng.normal(100, 10, 120) + 15 * ~LABELS, rng.normal(30, 5, 120)]
    result = _test(ShiftInputs(texts, numeric))
    assert result.auc > 0.8 and result.ci_low > 0.7, result
    assert result.p_value == pytest.approx(1 / 200) and result.n_permutations == 199
    assert result.null_mean == pytest.approx(0.5, abs=0.05)


def test_features_are_tfidf_then_standardised_numeric_columns():
    inputs = ShiftInputs(["the scan", "the lung scan", "", "lung"], np.array([[1.0, 7.0], [3.0, 7.0], [5.0, 7.0], [7.0, 7.0]]))
    features = input_features(inputs).toarray()
    # three words and three bigrams ("the scan", "the lung", "lung scan"); the second numeric column is
    # constant and dropped; the first standardised: mean 4, standard deviation sqrt(5)
    assert features.shape == (4, 3 + 3 + 1)
    np.testing.assert_allclose(features[:, -1], (np.array([1, 3, 5, 7]) - 4) / np.sqrt(5))
    np.testing.assert_allclose(np.linalg.norm(features[[0, 1, 3], :-1], axis=1), 1.0)  # TF-IDF rows: unit norm
    assert input_features(ShiftInputs(["", ""], np.array([[1.0], [2.0]]))).shape == (2, 1)  # no text: numeric only
    with pytest.raises(ValueError, match="nothing to classify"):
        input_features(ShiftInputs(["", " "], np.array([[1.0], [1.0]])))


def test_folds_shrink_to_the_smaller_group_and_inputs_are_checked():
    rng = np.random.default_rng(0)
    labels = np.r_[np.ones(3, bool), np.zeros(20, bool)]
    assert _test(ShiftInputs(_texts(rng, WORDS, 23)), labels, permutations=9).n_folds == 3
    with pytest.raises(ValueError, match="two members"):
        _test(ShiftInputs(_texts(rng, WORDS, 5)), np.r_[True, np.zeros(4, bool)])
    with pytest.raises(ValueError, match="labels"):
        _test(ShiftInputs(_texts(rng, WORDS, 5)), LABELS)
    with pytest.raises(ValueError, match="do not match"):
        ShiftInputs(["a", "b"], np.zeros((3, 1)))


def test_the_test_is_a_function_of_its_seed():
    rng = np.random.default_rng(5)
    inputs = ShiftInputs(_texts(rng, WORDS, 120))
    assert _test(inputs, permutations=49, seed=1) == _test(inputs, permutations=49, seed=1)
    assert _test(inputs, permutations=49, seed=1) != _test(inputs, permutations=49, seed=2)
