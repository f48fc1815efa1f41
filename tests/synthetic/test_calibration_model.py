"""The calibration model s = g e + b + eps + delta: easiness draws and per-model scores."""

from __future__ import annotations

import numpy as np
import pytest

from medexp.stats.calibration import calibration_scores, closed_count, draw_easiness


def test_easiness_has_exactly_the_closed_share_at_seeded_positions():
    first = draw_easiness(1061, 0.6, 900.0, np.random.default_rng(3))
    again = draw_easiness(1061, 0.6, 900.0, np.random.default_rng(3))
    other = draw_easiness(1061, 0.6, 900.0, np.random.default_rng(4))
    assert closed_count(1061, 0.6) == 424  # round(0.4 * 1061) = round(424.4)
    assert first.closed.sum() == other.closed.sum() == 424
    np.testing.assert_array_equal(first.values, again.values)
    np.testing.assert_array_equal(first.closed, again.closed)
    assert not np.array_equal(first.closed, other.closed)  # positions come from the seed
    assert [closed_count(n, 0.5) for n in (3, 5, 7)] == [2, 2, 4]  # 1.5, 2.5, 3.5: halves to even
    assert draw_easiness(5, 1.0, 900.0, np.random.default_rng(0)).closed.sum() == 0
    assert draw_easiness(5, 0.0, 900.0, np.random.default_rng(0)).closed.sum() == 5


def test_easiness_strata_follow_their_distributions():
    """OPEN e = |N(0,1)|: mean sqrt(2/pi), sd sqrt(1 - 2/pi); CLOSED e ~ Exp(mean 900): mean 900, sd 900."""
    draw = draw_easiness(200_000, 0.6, 900.0, np.random.default_rng(0))
    open_values, closed_values = draw.values[~draw.closed], draw.values[draw.closed]
    assert open_values.min() >= 0 and closed_values.min() >= 0
    open_se = np.sqrt(1 - 2 / np.pi) / np.sqrt(open_values.size)
    assert abs(open_values.mean() - np.sqrt(2 / np.pi)) < 5 * open_se
    assert abs(closed_values.mean() - 900.0) < 5 * 900.0 / np.sqrt(closed_values.size)
    # Exponential tail: P(e > 900) = exp(-1).
    share = np.mean(closed_values > 900.0)
    assert abs(share - np.exp(-1)) < 5 * np.sqrt(np.exp(-1) * (1 - np.exp(-1)) / closed_values.size)


@pytest.mark.parametrize("args, message", [
    ((0, 0.6, 900.0), "n_examples must be at least 1"),
    ((10, 1.2, 900.0), r"open_fraction must be in \[0, 1\]"),
    ((10, 0.6, 0.0), "closed_mean must be a positive number"),
    ((10, 0.6, float("nan")), "closed_mean must be a positive number"),
])
def test_bad_easiness_parameters_are_named(args, message):
    with pytest.raises(ValueError, match=message):
        draw_easiness(*args, np.random.default_rng(0))


def test_scores_without_noise_are_gain_times_easiness_plus_offset():
    easiness = np.array([0.0, 1.0, 10.0, 250.0])
    scores = calibration_scores(easiness, 2.0, -3.0, 0.0, np.random.default_rng(0))
    np.testing.assert_allclose(scores, [-3.0, -1.0, 17.0, 497.0])


def test_planted_contamination_adds_delta_on_exactly_its_share_and_keeps_the_noise():
    easiness = np.linspace(0, 100, 200)
    clean = calibration_scores(easiness, 1.0, 0.0, 1.0, np.random.default_rng(9))
    planted = calibration_scores(easiness, 1.0, 0.0, 1.0, np.random.default_rng(9), 0.1, 500.0)
    shift = planted - clean
    assert np.count_nonzero(shift) == 20  # round(0.1 * 200)
    np.testing.assert_allclose(shift[shift != 0], 500.0)
    noise = clean - easiness
    assert abs(noise.mean()) < 5 / np.sqrt(200) and 0.7 < noise.std() < 1.3


@pytest.mark.parametrize("args, message", [
    ((0.0, 1.0, 0.0, 0.0), "gain must be a positive number"),
    ((1.0, -1.0, 0.0, 0.0), "noise_sd must be >= 0"),
    ((1.0, 1.0, 1.5, 0.0), r"contaminated_fraction must be in \[0, 1\]"),
    ((1.0, 1.0, 0.1, -5.0), r"contamination_size \(delta\) must be >= 0"),
])
def test_bad_model_parameters_are_named(args, message):
    gain, noise_sd, fraction, size = args
    with pytest.raises(ValueError, match=message):
        calibration_scores(np.ones(4), gain, 0.0, noise_sd, np.random.default_rng(0), fraction, size)
