"""What a judge is and what it says about one reply (DESIGN.md, "Answers and probes": the judge).

A judge is one declaration (:class:`JudgeDeclaration`) in its own module, named in
:data:`medexp.answers.judges.JUDGES`: its kind, its schema, and the function reading a batch of
replies. For each reply it returns a :class:`Reading`: the answer the reply commits to
(``committed``: an option letter, ``yes``/``no``, an alternative's text or the normalised answer;
empty when none), the :class:`Verdict` and a short reason a person can check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from medexp.benchmarks.options import LETTERS


class Verdict(str, Enum):
    correct = "correct"
    wrong = "wrong"
    no_answer = "no_answer"  # a reply that commits to no answer: a refusal, both options, another question, noise
    error = "error"  # no reply at all (the model could not be asked); out of every denominator


@dataclass(frozen=True)
class Reading:
    """What a judge says one reply means."""

    committed: str  # the answer the reply commits to, normalised; "" when none
    verdict: Verdict
    reason: str  # why, in a few words ("leading no", "restates the finding as absent", "refusal")
    score: float | None = None  # the credit a harness's metric gives the reply (LLaVA-Med's open recall)

    def __post_init__(self) -> None:
        if (self.verdict in (Verdict.correct, Verdict.wrong)) != bool(self.committed):
            raise ValueError(f"a {self.verdict.value} verdict goes with a committed answer, and only it "
                             f"(committed={self.committed!r}, reason={self.reason!r})")


def no_answer(reason: str) -> Reading:
    return Reading("", Verdict.no_answer, reason)


def judged(committed: str, right: bool, reason: str) -> Reading:
    """The reading of a reply committing to ``committed``, right or wrong."""
    return Reading(committed, Verdict.correct if right else Verdict.wrong, reason)


def judged_option(probe, position: int, reason: str) -> Reading:
    """The reading of a reply choosing the option at ``position`` of a multiple-choice ``probe``:
    committed as the positional letter, as the probe's gold is, whatever labels its prompt showed."""
    return judged(LETTERS[position], LETTERS[position] == probe.gold, reason)


@dataclass(frozen=True)
class JudgeContext:
    """What a judge may need beyond the replies: the cache folder (a judge model's client
    settings live in its config)."""

    cache_dir: Any


# (probes, replies, the judge's config, context) -> one Reading per reply, in order
JudgeFunction = Callable[[Sequence, Sequence[str], Any, JudgeContext], list[Reading]]


@dataclass(frozen=True)
class JudgeDeclaration:
    """A judge: its kind (the ``kind`` of its config), its schema, its batch function, and whether
    its verdicts are worth caching (a model's are; rules are cheaper to read again than to look up)."""

    kind: str
    schema: type
    judge: JudgeFunction
    cached: bool = False


def per_reply(read: Callable[[Any, str, Any], Reading]) -> JudgeFunction:
    """A batch judge function from ``read(probe, reply, cfg)``, a rule reading one reply."""

    def judge(probes: Sequence, replies: Sequence[str], cfg: Any, context: JudgeContext) -> list[Reading]:
        return [read(probe, reply, cfg) for probe, reply in zip(probes, replies)]

    return judge
