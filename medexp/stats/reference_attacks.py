"""Membership attacks against reference models whose training sets are known.

Each reference model trained on a random half of the audited examples (like LiRA's shadow
models): for an example it is "IN" (it trained on the example) or "OUT". The attacks compare the
target model's score of each example with the references' scores of the same example:

* :func:`lira_offline`: offline LiRA (Carlini et al., 2022), the OUT references only;
* :func:`lira_online`: online LiRA, a likelihood ratio of the IN and the OUT references;
* :func:`rmia`: RMIA (Zarifzadeh et al., 2024), the target's probability relative to the
  references', compared with a population of examples;
* :func:`reference_half`, :func:`reference_halves`: which examples each reference trains on.

Conventions: n examples (columns), R reference models (rows); ``reference_in`` is an (R, n)
bool matrix, True where reference r trained on example j; every score is oriented so that
higher means "member". phi is the logit-scaled confidence log(p / (1 - p)), computed by the
caller from log p. Pure functions of arrays (NumPy, SciPy); the halves draw their seeds with
:func:`medexp.kernel.hashing.derive_seed`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats as sps
from scipy.special import logsumexp

from medexp.kernel.hashing import derive_seed

_SIGMA_FLOOR = 1e-6  # identical references would otherwise have a zero spread and divide by zero


def _checked(target, reference, reference_in, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The target's (n,) scores, the references' (R, n) scores and the (R, n) IN matrix, checked."""
    target = np.asarray(target, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    reference_in = np.asarray(reference_in)
    if target.ndim != 1:
        raise ValueError(f"the target's {what} must be one value per example (n,), got shape {target.shape}")
    if reference.ndim != 2 or reference.shape[1] != target.size:
        raise ValueError(f"the references' {what} must be (references, {target.size} examples), "
                         f"got shape {reference.shape}")
    if reference_in.shape != reference.shape:
        raise ValueError(f"reference_in must have the references' shape {reference.shape}, got {reference_in.shape}")
    if reference_in.dtype != bool:
        # 0/1 integers would also index, silently as positions rather than as a mask
        raise ValueError(f"reference_in must be a bool matrix, got dtype {reference_in.dtype}")
    for name, values in (("target's", target), ("references'", reference)):
        bad = int(np.sum(~np.isfinite(values)))
        if bad:
            raise ValueError(f"{bad} of the {name} {what} values are NaN or infinite")
    return target, reference, reference_in


class TooFewReferences(ValueError):
    """Some example has too few references on the side (IN or OUT) an attack reads."""


def _require_references(side: np.ndarray, needed: int, name: str, reason: str) -> None:
    """Refuse when some example has fewer than ``needed`` references on one side (IN or OUT)."""
    short = int(np.sum(side.sum(axis=0) < needed))
    if short:
        raise TooFewReferences(f"{short} of {side.shape[1]} examples have fewer than {needed} {name} references "
                               f"({reason}); add reference models (detector.reference_models, or "
                               "detector.trained_references for models trained on random halves of the examples)")


def _side_moments(values: np.ndarray, side: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per example, the mean of the references on ``side`` and their variance (ddof=1; NaN
    where fewer than two references are on that side)."""
    count = side.sum(axis=0)
    mean = np.where(side, values, 0.0).sum(axis=0) / np.maximum(count, 1)
    squares = np.where(side, (values - mean) ** 2, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = np.where(count >= 2, squares / (count - 1), np.nan)
    return mean, variance


def _sigma(variance: np.ndarray, per_example: bool) -> np.ndarray | float:
    """Each example's own standard deviation, or one pooled over the examples: the square root
    of the mean per-example variance over the examples that have one. With no spread to estimate
    anywhere the pooled sigma is 1.0, a constant that leaves the ranking unchanged."""
    if per_example:
        return np.maximum(np.sqrt(variance), _SIGMA_FLOOR)
    known = variance[np.isfinite(variance)]
    return max(float(np.sqrt(known.mean())), _SIGMA_FLOOR) if known.size else 1.0


def lira_offline(target_phi, reference_phi, reference_in, per_example_variance: bool) -> np.ndarray:
    """Offline LiRA: (phi - mu_out) / sigma_out per example, from its OUT references only.

    mu_out is the mean of the example's OUT references' phi; sigma_out is the example's own
    standard deviation (``per_example_variance``: ddof=1, needs >= 2 OUT references per example)
    or one pooled over the examples (see :func:`_sigma`). The score is monotone in the one-sided
    Gaussian p-value Pr(phi_out >= phi), so both have the same ROC. Needs >= 1 OUT reference per
    example.
    """
    phi, references, reference_in = _checked(target_phi, reference_phi, reference_in, "phi")
    out = ~reference_in
    _require_references(out, 1, "OUT", "offline LiRA centres each example on its OUT references")
    if per_example_variance:
        _require_references(out, 2, "OUT", "a per-example variance needs two; or use the pooled variance")
    mu_out, variance_out = _side_moments(references, out)
    return (phi - mu_out) / _sigma(variance_out, per_example_variance)


def lira_online(target_phi, reference_phi, reference_in, per_example_variance: bool) -> np.ndarray:
    """Online LiRA: log N(phi; mu_in, s_in) - log N(phi; mu_out, s_out) per example.

    mu_in and mu_out are the means of the example's IN and OUT references' phi; s_in and s_out
    each example's own standard deviations (``per_example_variance``: needs >= 2 IN and >= 2 OUT
    references per example) or one pooled per side over the examples (see :func:`_sigma`).
    Needs >= 1 IN and >= 1 OUT reference per example.
    """
    phi, references, reference_in = _checked(target_phi, reference_phi, reference_in, "phi")
    sides = {"IN": reference_in, "OUT": ~reference_in}
    for name, side in sides.items():
        _require_references(side, 1, name, "online LiRA compares each example's IN and OUT references")
        if per_example_variance:
            _require_references(side, 2, name, "a per-example variance needs two; or use the pooled variance")
    (mu_in, variance_in), (mu_out, variance_out) = (_side_moments(references, side) for side in sides.values())
    s_in, s_out = _sigma(variance_in, per_example_variance), _sigma(variance_out, per_example_variance)
    return sps.norm.logpdf(phi, mu_in, s_in) - sps.norm.logpdf(phi, mu_out, s_out)


def rmia(target_logprob, reference_logprob, reference_in, population, gamma: float,
         offline_a: float | None) -> np.ndarray:
    """RMIA: per example x, the fraction of the population z (z != x) that x dominates,
    ratio(x) / ratio(z) >= gamma, where ratio(x) = p(x | target) / Pr(x).

    p(x | theta) = exp(logprob). Pr(x) is the mean of p(x | theta_r) over every reference
    (online, ``offline_a`` None) or, offline, from the OUT references only,
    Pr(x) = ((1 + a) mean_OUT p(x | theta_r) + (1 - a)) / 2, the paper's linear correction for
    missing IN references (a in [0, 1], tuned on references). Everything is computed in logs.
    ``population`` is an (n,) bool mask of the examples used as z (at least two).

    Monotone in ratio(x): for a fixed population the count of z with
    log ratio(z) <= log ratio(x) - log gamma can only grow with ratio(x), so among examples
    outside the population (one common denominator) the score orders examples as ratio(x) does
    and its AUC equals that of log ratio(x) up to ties. An example inside the population leaves
    itself out, so its denominator is one smaller; with gamma = 1 the score is still monotone
    over all examples, otherwise the two groups may swap within one count step.
    Resolution: the score moves in steps of 1 / (population size), so examples whose ratios fall
    between the same two population ratios (shifted by gamma) tie; gamma sets where the steps
    fall: a large gamma leaves only examples well above the population apart from zero.
    """
    logprob, references, reference_in = _checked(target_logprob, reference_logprob, reference_in, "log p")
    population = np.asarray(population)
    if population.shape != logprob.shape or population.dtype != bool:
        raise ValueError(f"population must be an ({logprob.size},) bool mask, got {population.dtype} "
                         f"of shape {population.shape}")
    size = int(population.sum())
    if size < 2:
        raise ValueError(f"the population needs >= 2 examples (each example is compared with the others), have {size}")
    if not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be a positive finite ratio, got {gamma}")
    if offline_a is None:
        log_prior = logsumexp(references, axis=0) - np.log(references.shape[0])
    else:
        if not 0 <= offline_a <= 1:
            raise ValueError(f"offline_a must be in [0, 1], got {offline_a}")
        out = ~reference_in
        _require_references(out, 1, "OUT", "offline RMIA averages each example's OUT references")
        log_mean_out = logsumexp(np.where(out, references, -np.inf), axis=0) - np.log(out.sum(axis=0))
        with np.errstate(divide="ignore"):  # a = 1 makes the constant term log 0 = -inf, which logaddexp absorbs
            log_prior = np.logaddexp(np.log1p(offline_a) + log_mean_out, np.log1p(-offline_a)) - np.log(2.0)
    log_ratio = logprob - log_prior
    threshold = log_ratio - np.log(gamma)
    dominated = np.searchsorted(np.sort(log_ratio[population]), threshold, side="right")
    # the same comparison searchsorted made for x's own entry, so that z = x is removed exactly when it was counted
    dominated = dominated - (population & (log_ratio <= threshold)).astype(int)
    return dominated / (size - population.astype(int))


def reference_half(ids: Sequence[str], index: int, seed: int) -> np.ndarray:
    """The (n,) bool mask, aligned with ``ids``, of the examples reference ``index`` trains on.

    References 2k and 2k + 1 take complementary halves of one random permutation drawn with
    ``derive_seed(seed, "half", k)``: 2k the first floor(n / 2) examples, 2k + 1 the rest. The
    permutation is of the sorted ids, so a half depends on which ids there are, not on their order.
    """
    ids = [str(value) for value in ids]
    if len(set(ids)) != len(ids):
        raise ValueError(f"ids must be unique, got {len(ids) - len(set(ids))} repeated")
    if len(ids) < 2:
        raise ValueError(f"halves need >= 2 examples, got {len(ids)}")
    if index < 0:
        raise ValueError(f"a reference index is >= 0, got {index}")
    ordered = sorted(ids)
    permuted = np.random.default_rng(derive_seed(seed, "half", index // 2)).permutation(len(ordered))
    first = {ordered[position] for position in permuted[: len(ordered) // 2]}
    return np.array([(value in first) == (index % 2 == 0) for value in ids], dtype=bool)


def reference_halves(ids: Sequence[str], count: int, seed: int) -> np.ndarray:
    """The (count, n) IN matrix of ``count`` references (see :func:`reference_half`): with an
    even count every example is IN for exactly count / 2 references; with an odd count the last
    reference takes a fresh half of its own."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    return np.vstack([reference_half(ids, index, seed) for index in range(count)])
