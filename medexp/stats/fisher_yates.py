"""Weighted sums over uniform random permutations, at about the cost of their random numbers.

``permuted_dots(values, weights, n, draw_words)`` returns, for each of ``n`` independent uniform
permutations pi, the sum over positions i of ``weights[i] * values[pi(i)]``: the null draws of a
rank permutation test. A compiled Fisher-Yates shuffle makes them in one pass per permutation
with the dot product fused in, so the work per position is one 32-bit random word, a multiply
and a swap inside an array that stays in cache (docs/testing.md measures it).

Exactness. Step i (from the last position down) moves a uniform position j of 0..i to i. j comes
from a 32-bit word w by Lemire's multiply-shift, j = floor(w (i + 1) / 2**32); the 2**32 mod (i + 1)
words whose product's low half falls below that count are rejected and another word is drawn, so
each j has exactly floor(2**32 / (i + 1)) words (no modulo bias). Each permutation shuffles the
arrangement the previous one left: a uniform shuffle of any fixed arrangement is uniform and
independent of it.

Reproducibility. The permutations are a function of the stream of words alone: the kernel keeps
its place across blocks of words, so neither the block size nor the CPU changes them. Sums are in
64-bit integers on one thread, exact and in a fixed order whatever the SIMD width or thread count.
"""

from __future__ import annotations

from typing import Callable

import numba
import numpy as np

# Words drawn per call of ``draw_words``: 64 KiB, read once by the kernel while still in cache.
BLOCK_WORDS = 1 << 14

_WORD_RANGE = 1 << 32


def permuted_dots(
    values, weights, n_permutations: int, draw_words: Callable[[int], np.ndarray], block_words: int = BLOCK_WORDS
) -> np.ndarray:
    """``sum_i weights[i] * values[pi_k(i)]`` for ``n_permutations`` uniform permutations pi_k.

    ``values`` and ``weights`` are integer arrays of one length (at most 2**32, the range of a
    word); ``draw_words(count)`` returns ``count`` independent uniform uint32 words (numpy's
    ``Generator.integers(0, 2**32, count, dtype=np.uint32)``). The result does not depend on
    ``block_words``, the count asked for at a time.
    """
    if not all(np.issubdtype(np.asarray(array).dtype, np.integer) for array in (values, weights)):
        raise ValueError("values and weights must be integers: the sums are exact")
    shuffled = np.array(values, dtype=np.int64)
    weights = np.ascontiguousarray(weights, dtype=np.int64)
    if shuffled.ndim != 1 or shuffled.shape != weights.shape or shuffled.size < 1:
        raise ValueError(f"values and weights must be 1-d arrays of one length, got {shuffled.shape} and {weights.shape}")
    if shuffled.size > _WORD_RANGE:
        raise ValueError(f"{shuffled.size} values: a 32-bit word draws positions among at most 2**32")
    # In Python integers, which cannot overflow: the largest partial sum any permutation can reach
    # must fit the kernel's int64.
    largest_value = max(abs(int(shuffled.min())), abs(int(shuffled.max())))
    if largest_value * sum(map(abs, weights.tolist())) >= 1 << 63:
        raise ValueError("values and weights too large for exact 64-bit sums")
    sums = np.empty(n_permutations, dtype=np.int64)
    progress = np.array([shuffled.size - 1, 0], dtype=np.int64)  # next step, partial sum
    done = 0
    while done < n_permutations:
        done = _shuffle_and_sum(shuffled, weights, draw_words(block_words), sums, done, progress)
    return sums


@numba.njit(cache=True, error_model="numpy")
def _shuffle_and_sum(shuffled, weights, words, sums, done, progress):
    """Continue the Fisher-Yates shuffles where ``progress`` left off until the words run out or
    every sum is filled; return the count of sums filled."""
    n = shuffled.size
    step, partial = progress[0], progress[1]
    word = 0
    while done < sums.size:
        while step > 0:
            if word == words.size:
                progress[0], progress[1] = step, partial
                return done
            bound = np.uint64(step + 1)
            product = np.uint64(words[word]) * bound
            word += 1
            low = product & np.uint64(0xFFFFFFFF)
            # The threshold 2**32 mod bound costs a division: computed only in the rare case
            # (probability bound / 2**32) that the low half is small enough to need it.
            if low < bound and low < (np.uint64(_WORD_RANGE) - bound) % bound:
                continue
            j = np.int64(product >> np.uint64(32))
            moved = shuffled[j]
            shuffled[j] = shuffled[step]
            shuffled[step] = moved
            partial += weights[step] * moved
            step -= 1
        sums[done] = partial + weights[0] * shuffled[0]
        done += 1
        step, partial = n - 1, 0
    progress[0], progress[1] = step, partial
    return done
