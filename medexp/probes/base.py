"""The probe record: one question put to a model, derived from one benchmark example."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from medexp.benchmarks.options import LETTERS

RELEASE_ID_KEY = "release_probe_id"  # Probe.meta key of the id a release gave the probe
# Probe.meta key of a derived probe (a release original blurred or without image): its source's release id.
SOURCE_RELEASE_ID_KEY = "source_release_id"


def option_letters(n_options: int) -> str:
    """The letters labelling ``n_options`` options in displayed order (A, B, ...)."""
    if not 1 <= n_options <= len(LETTERS):
        raise ValueError(f"a probe has 1 to {len(LETTERS)} options, got {n_options}")
    return LETTERS[:n_options]


def letter_of(options: tuple[str, ...], text: str) -> str:
    """The letter of the option whose text is ``text`` (exact match), or an error naming the options."""
    try:
        return LETTERS[options.index(text)]
    except ValueError:
        raise ValueError(f"{text!r} is not one of the options {list(options)}") from None


@dataclass(frozen=True)
class Probe:
    """One question put to a model.

    ``probe_id`` is ``<example_id>::<kind>`` or ``<example_id>::<kind>::<variant>``. With
    ``options`` (texts in displayed order, labelled A, B, ... by position) ``gold`` is the gold
    option's letter; without them it is the gold answer text. ``labels``, when given, are what
    the prompt shows instead of A, B, ... (1, 2, ...: renumbered options); ``gold``, ``refusal``
    and a judged ``choice`` stay positional letters, so that every arm of a comparison is read
    in the same terms. ``refusal`` is the letter of an
    explicit "I don't know" / refusal option when the probe has one. ``image`` is None for a
    text-only probe; derived images live content-addressed in the cache.
    """

    probe_id: str
    example_id: str
    kind: str
    question: str
    gold: str
    image: Optional[Path] = None
    options: Optional[tuple[str, ...]] = None
    refusal: Optional[str] = None
    meta: dict[str, Any] = field(default_factory=dict)
    labels: Optional[tuple[str, ...]] = None

    def __post_init__(self) -> None:
        if not self.probe_id.startswith(f"{self.example_id}::{self.kind}"):
            raise ValueError(f"probe id {self.probe_id!r} must start with '<example_id>::<kind>' "
                             f"({self.example_id}::{self.kind})")
        if self.options is not None:
            letters = option_letters(len(self.options))
            if self.gold not in letters:
                raise ValueError(f"{self.probe_id}: gold {self.gold!r} is not an option letter of {letters}")
            if self.refusal is not None and self.refusal not in letters:
                raise ValueError(f"{self.probe_id}: refusal {self.refusal!r} is not an option letter of {letters}")
        elif self.refusal is not None:
            raise ValueError(f"{self.probe_id}: a refusal option needs options")
        if self.labels is not None:
            if self.options is None or len(self.labels) != len(self.options):
                raise ValueError(f"{self.probe_id}: {len(self.labels)} label(s) for "
                                 f"{0 if self.options is None else len(self.options)} option(s)")
            stripped = [str(label).strip() for label in self.labels]
            if not all(stripped) or len(set(stripped)) != len(stripped):
                raise ValueError(f"{self.probe_id}: option labels must be distinct and non-empty, got {list(self.labels)}")
        if not str(self.gold).strip():
            raise ValueError(f"{self.probe_id}: empty gold answer")

    @property
    def is_choice(self) -> bool:
        return self.options is not None

    @property
    def shown_labels(self) -> tuple[str, ...]:
        """The labels the prompt shows, in displayed order (the letters unless ``labels`` are set)."""
        if self.options is None:
            raise ValueError(f"{self.probe_id}: a free-text probe has no option labels")
        return self.labels if self.labels is not None else tuple(option_letters(len(self.options)))

    @property
    def gold_text(self) -> str:
        """The gold answer as text (the gold option's text for a multiple-choice probe)."""
        return self.options[LETTERS.index(self.gold)] if self.options is not None else self.gold
