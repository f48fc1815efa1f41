"""The compiled permutation draws: uniform, unbiased word by word, independent of their block size."""

from itertools import permutations

import numpy as np
import pytest
from scipy import stats as sps

from medexp.stats.fisher_yates import BLOCK_WORDS, permuted_dots


def _words(seed):
    rng = np.random.default_rng(seed)
    return lambda count: rng.integers(0, 1 << 32, size=count, dtype=np.uint32)


def _decoded_orders(n, n_permutations, seed):
    """The permutations themselves: value 8**k weighted by its position's earliness (< 8) puts each
    item's earliness in its own octal digit of the sum."""
    sums = permuted_dots(8 ** np.arange(n), np.arange(n - 1, -1, -1), n_permutations, _words(seed))
    earliness = (sums[:, None] // 8 ** np.arange(n)) % 8  # [draw, item]
    return [tuple(row) for row in (n - 1 - earliness)]  # position of each item


def test_every_order_of_five_items_is_equally_likely():
    orders = _decoded_orders(5, 24_000, seed=1)
    counts = np.array([orders.count(order) for order in permutations(range(5))])
    assert counts.sum() == 24_000  # every decoded draw is a permutation
    assert sps.chisquare(counts).pvalue > 1e-3


def test_consecutive_draws_are_independent():
    """Each draw reshuffles the arrangement the previous one left: pairs of consecutive orders of
    four items fill all 24 x 24 cells evenly."""
    orders = _decoded_orders(4, 57_600, seed=2)
    index = {order: k for k, order in enumerate(permutations(range(4)))}
    codes = np.array([index[order] for order in orders])
    pairs = np.bincount(codes[:-1] * 24 + codes[1:], minlength=24 * 24)
    assert sps.chisquare(pairs).pvalue > 1e-3


@pytest.mark.parametrize("item", [0, 999])
def test_an_item_lands_on_every_position_of_a_thousand_equally_often(item):
    marker = np.zeros(1000, dtype=np.int64)
    marker[item] = 1
    positions = permuted_dots(marker, np.arange(1000), 50_000, _words(item))  # weight = position
    assert sps.chisquare(np.bincount(positions, minlength=1000)).pvalue > 1e-3


def test_a_word_that_would_bias_the_draw_is_rejected_and_another_is_drawn():
    """Step 2 draws among 3 positions: word 0 is the one word of 2**32 rejected (2**32 mod 3 = 1),
    so the stream 0, 2**31, 0 shuffles as 2**31, 0 does. Step 1 draws among 2, a power of two:
    nothing is rejected and word 0 picks position 0.

    [1, 10, 100] -> step 2, j = floor(3 * 2**31 / 2**32) = 1 -> [1, 100, 10]
                 -> step 1, j = 0 -> [100, 1, 10]; with weights [2, 1, 0]: 200 + 1 + 0 = 201."""

    def stream(*words):
        remaining = iter(words)
        return lambda count: np.array([next(remaining) for _ in range(count)], dtype=np.uint32)

    values, weights = [1, 10, 100], [2, 1, 0]
    assert permuted_dots(values, weights, 1, stream(1 << 31, 0), block_words=1).tolist() == [201]
    assert permuted_dots(values, weights, 1, stream(0, 1 << 31, 0), block_words=1).tolist() == [201]
    # Word 1 (low half 3, not below the threshold 1) is kept and picks position 0, as word 0 would
    # have: [100, 10, 1] -> 10 * 1 + 100 * 2. Rejecting it too would end the stream.
    assert permuted_dots(values, weights, 1, stream(1, 1 << 31), block_words=1).tolist() == [210]


def test_the_sums_do_not_depend_on_the_block_size():
    values = np.random.default_rng(3).integers(0, 500, size=300)
    weights = np.arange(300)
    reference = permuted_dots(values, weights, 500, _words(4))
    for block in (1, 7, 299, 300, BLOCK_WORDS * 3):
        np.testing.assert_array_equal(permuted_dots(values, weights, 500, _words(4), block_words=block), reference)


def test_inputs_whose_sums_would_not_be_exact_are_refused():
    with pytest.raises(ValueError, match="64-bit"):
        permuted_dots([2**40, 1], [2**30, 1], 1, _words(0))
    with pytest.raises(ValueError, match="one length"):
        permuted_dots([1, 2, 3], [1, 2], 1, _words(0))
    with pytest.raises(ValueError, match="integers"):
        permuted_dots([0.5, 1.0], [1, 2], 1, _words(0))
