"""The five-option wrapper: up to four answer options plus a probe-specific refusal option.

MedVIGIL asks every probe as a multiple-choice question whose last option is a refusal worded
for the probe ("the premise is false" for a false-premise trap, "the region is not visible" for
a masked region). Where the answer is still expected, the gold is an answer option; where the
evidence is broken (trap, masked region) the gold is the refusal option.

Two letter placements:

* fixed, the release's convention: the gold answer at A, the other answers in their given
  order, the refusal last (so a refusal gold is always the last letter, E with four answers);
* rotated: a seeded uniform permutation of all options, refusal included, so that the gold's
  letter is spread evenly over A-E and a model's letter preference cannot pass for skill.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import numpy as np

from medexp.benchmarks.options import LETTERS, normalise

N_ANSWERS = 4
REFUSAL_TEXTS: dict[str, str] = {
    "roi_masked": "The region needed to answer is not visible in this image.",
    "false_premise": "The premise of the question is false.",
    "no_image": "No image is provided, so the question cannot be answered.",
}
DEFAULT_REFUSAL = "The image does not show enough to answer the question."


@dataclass(frozen=True)
class OptionSet:
    """Options in displayed order with the letters of the gold and of the refusal option."""

    options: tuple[str, ...]
    gold: str
    refusal: Optional[str]


def refusal_text(kind: str) -> str:
    """The refusal option's wording for a probe kind."""
    return REFUSAL_TEXTS.get(kind, DEFAULT_REFUSAL)


def answer_choices(gold: str, pool: Iterable[str], rng: np.random.Generator, n_answers: int = N_ANSWERS,
                   required: Sequence[str] = ()) -> tuple[str, ...]:
    """The gold followed by up to ``n_answers - 1`` distinct distractors.

    ``required`` distractors come first (for instance the other side, so that a left-right flip
    can move the gold onto it); the rest are drawn by ``rng`` from ``pool``, which is
    de-duplicated and sorted first so that its order does not matter. Fewer candidates give
    fewer answers (a yes/no question has two).
    """
    if n_answers < 1:
        raise ValueError(f"n_answers must be >= 1, got {n_answers}")
    chosen = [str(gold)]
    seen = {normalise(gold)}
    for text in required:
        if normalise(text) not in seen:
            chosen.append(str(text))
            seen.add(normalise(text))
    candidates = sorted({normalise(text): str(text) for text in pool if normalise(text) not in seen}.items())
    room = max(0, n_answers - len(chosen))
    if room and candidates:
        picks = rng.choice(len(candidates), size=min(room, len(candidates)), replace=False)
        chosen.extend(candidates[int(index)][1] for index in picks)
    if len(chosen) > n_answers:
        raise ValueError(f"{len(chosen)} answers (gold and required {list(required)}) exceed n_answers={n_answers}")
    return tuple(chosen)


def wrap_options(answers: Sequence[str], refusal: str, gold_text: Optional[str],
                 rng: Optional[np.random.Generator] = None) -> OptionSet:
    """The answers plus the refusal option, lettered in fixed (``rng`` None) or rotated order.

    ``gold_text`` is the correct answer (one of ``answers``), or None when the refusal is correct.
    """
    texts = [str(text) for text in answers]
    if gold_text is not None:
        keys = [normalise(text) for text in texts]
        if normalise(gold_text) not in keys:
            raise ValueError(f"gold {gold_text!r} is not among the answers {texts}")
        index = keys.index(normalise(gold_text))
        texts = [texts[index]] + texts[:index] + texts[index + 1:]  # the release puts the gold at A
    options = [*texts, str(refusal)]
    if len({normalise(text) for text in options}) != len(options):
        raise ValueError(f"options must be distinct (case and spacing ignored): {options}")
    if len(options) > len(LETTERS):
        raise ValueError(f"{len(options)} options exceed the {len(LETTERS)} letters")
    fixed = OptionSet(tuple(options), LETTERS[0 if gold_text is not None else len(options) - 1],
                      LETTERS[len(options) - 1])
    return fixed if rng is None else rotate_options(fixed, rng)


def letter_rng(seed: int, probe_id: str) -> np.random.Generator:
    """The stream a probe's letter rotation is drawn from: the cell's probe seed and the probe id,
    so a probe's letters do not depend on which other probes are made."""
    from medexp.kernel.hashing import derive_seed

    return np.random.default_rng(derive_seed(seed, probe_id, "options"))


def rotate_options(option_set: OptionSet, rng: np.random.Generator) -> OptionSet:
    """``option_set`` under a uniform permutation drawn from ``rng``: every option, refusal
    included, moves, and the gold and refusal letters follow their options (a refusal of None,
    a probe without one, stays None)."""
    order = rng.permutation(len(option_set.options))

    def moved(letter: Optional[str]) -> Optional[str]:
        return None if letter is None else LETTERS[int(np.flatnonzero(order == LETTERS.index(letter))[0])]

    return OptionSet(tuple(option_set.options[int(i)] for i in order), moved(option_set.gold),
                     moved(option_set.refusal))
