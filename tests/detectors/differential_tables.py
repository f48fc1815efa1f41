"""Loss tables of differential pairs for the detector tests: hand-made, or drawn."""

from __future__ import annotations

import numpy as np
from omegaconf import OmegaConf

from medexp.config.schemas import MembershipConfig, MemorizationConfig
from medexp.detectors import PairedLosses
from medexp.stats.shift import ShiftInputs


def memorization_config(**overrides):
    return OmegaConf.structured(MemorizationConfig(name="memorization", family="memorization", **overrides))


def membership_config(**overrides):
    return OmegaConf.structured(MembershipConfig(name="membership", family="membership", **overrides))


def losses(member, classes, candidate_nll, independent_nll, candidate_logprob=None, independent_logprob=None,
           references=None, reference_member=None) -> PairedLosses:
    """A PairedLosses from (pairs, n) arrays; log-probabilities default to minus the losses
    (one-token answers, as a classifier's), class frequencies are the classes' shares."""
    candidate_nll = np.atleast_2d(np.asarray(candidate_nll, dtype=float))
    independent_nll = np.atleast_2d(np.asarray(independent_nll, dtype=float))
    classes = np.asarray(classes)
    frequency = np.array([np.mean(classes == cls) for cls in classes])
    references = np.empty((0, classes.size)) if references is None else np.atleast_2d(references)
    return PairedLosses(
        example_ids=[f"ex{i}" for i in range(classes.size)],
        member=np.asarray(member, dtype=bool),
        classes=classes,
        class_frequency=frequency,
        candidate_nll=candidate_nll,
        independent_nll=independent_nll,
        candidate_logprob=-candidate_nll if candidate_logprob is None else np.atleast_2d(candidate_logprob),
        independent_logprob=-independent_nll if independent_logprob is None else np.atleast_2d(independent_logprob),
        pair_labels=[f"pair{i}" for i in range(candidate_nll.shape[0])],
        reference_logprob=references,
        reference_labels=[f"ref{i}" for i in range(references.shape[0])],
        reference_member=reference_member,
    )


def drawn(seed: int, n_members: int = 60, n_nonmembers: int = 60, pairs: int = 2, planted: float = 0.0,
          planted_class: str | None = None) -> PairedLosses:
    """Losses of ``pairs`` pairs from one distribution; ``planted`` shrinks the candidates' loss on
    the members (of ``planted_class`` only, when given) by the factor exp(-planted): memorization
    of known size."""
    rng = np.random.default_rng(seed)
    n = n_members + n_nonmembers
    member = np.r_[np.ones(n_members, bool), np.zeros(n_nonmembers, bool)]
    classes = rng.choice(np.array(["common", "middle", "rare"]), size=n, p=[0.6, 0.3, 0.1])
    difficulty = rng.exponential(1.0, size=n)  # shared by every model: some examples are hard
    independent = difficulty * np.exp(rng.normal(0, 0.3, size=(pairs, n)))
    candidate = difficulty * np.exp(rng.normal(0, 0.3, size=(pairs, n)))
    target = member if planted_class is None else member & (classes == planted_class)
    candidate = candidate * np.exp(-planted * target)  # the planted examples' loss shrinks
    return losses(member, classes, candidate, independent)


def drawn_with_references(seed: int, n: int = 200, references: int = 8, planted: float = 1.0) -> PairedLosses:
    """One pair and ``references`` reference models trained on complementary random halves
    (``reference_halves``): every model that trained on an example has its loss shrunk by the
    factor exp(-planted), and examples differ in how hard they are far more than models differ, which
    is what per-example reference distributions are for. The first half of the examples are members."""
    from medexp.stats.reference_attacks import reference_halves

    rng = np.random.default_rng(seed)
    ids = [f"ex{i}" for i in range(n)]
    member = np.arange(n) < n // 2
    difficulty = rng.lognormal(0.0, 1.0, size=n)
    trained = np.vstack([member, np.zeros(n, bool), reference_halves(ids, references, seed)])
    nll = difficulty * np.exp(rng.normal(0, 0.2, size=trained.shape) - planted * trained)
    classes = np.array(["a"] * n)
    return losses(member, classes, nll[:1], nll[1:2], references=-nll[2:], reference_member=trained[2:])


def alike_inputs(table: PairedLosses, seed: int = 0) -> ShiftInputs:
    """Texts for the examples of ``table``, drawn alike for members and non-members (eight words
    of one vocabulary each): the shift control has nothing to find."""
    rng = np.random.default_rng(seed)
    words = np.array([f"word{i}" for i in range(40)])
    return ShiftInputs([" ".join(rng.choice(words, size=8)) for _ in table.example_ids])


def shifted_inputs(table: PairedLosses, seed: int = 0) -> ShiftInputs:
    """Texts whose vocabulary gives membership away: members draw from the first 30 of 40 words,
    non-members from the last 30 (a source shift, no memorisation)."""
    rng = np.random.default_rng(seed)
    words = np.array([f"word{i}" for i in range(40)])
    return ShiftInputs([" ".join(rng.choice(words[:30] if member else words[10:], size=8)) for member in table.member])
