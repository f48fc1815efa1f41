"""The translator interface, its cache, and the guard against a translator that changes nothing.

A translator takes *examples* and the name of a text field, not bare strings, because the demo's
offline translator reads a paraphrase the benchmark generator stored with each example; model
translators (:class:`CachedTextTranslator`) round-trip the field's text and cache the result.

Cache: one entry per (translator settings, code version, the ordered distinct texts), under
``<cache_dir>/translations``, written in verified, resumable parquet shards by
:class:`medexp.scoring.cache.ScoreCache` on :class:`medexp.kernel.shards.ShardedEntry` (text ids are
SHA-256 prefixes of the texts, so a shard holding other texts is recomputed). The settings hold
everything that can change a translation: the checkpoints (hub id and revision, or a local
directory's file digests), the source prefix, the decoding settings and the punctuation
normaliser's version.

Unchanged texts: a back-translation with the same words as its source (case and punctuation
aside) makes the two slot-guessing arms identical. :func:`check_changed` refuses a translator
that returns more than ``max_unchanged`` of its texts unchanged (an identity "translator" returns
all of them), naming it; the slot prober skips the remaining unchanged items and counts them.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medexp.probes.keywords import words

TRANSLATION_VERSION = "back-translation-v1"  # bump when a change alters any cached translation
SHARD_SIZE = 512


@dataclass(frozen=True)
class RoundTrip:
    source: str  # the example's text
    back: str  # the text after English -> pivot -> English (or the demo's paraphrase)
    pivot: str | None = None  # the pivot-language text, when a model made it


def example_text(example, field: str) -> str:
    """The text slot guessing masks: ``question``, ``answer`` or ``meta.<key>`` (a caption field)."""
    if field in ("question", "answer"):
        value = getattr(example, field)
    elif field.startswith("meta.") and len(field) > len("meta."):
        key = field[len("meta."):]
        if example.meta.get(key) is None:
            raise ValueError(f"text_field={field!r}: example {example.example_id} has no meta[{key!r}]; "
                             f"its meta fields are {sorted(example.meta)}")
        value = example.meta[key]
    else:
        raise ValueError(f"text_field={field!r}: use 'question', 'answer' or 'meta.<key>' (e.g. meta.caption)")
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"text_field={field!r}: example {example.example_id} has no text there ({value!r})")
    return value


def unchanged(trip: RoundTrip) -> bool:
    """Whether the back-translation has the source's words, in order (case and punctuation aside)."""
    return words(trip.source) == words(trip.back)


def check_changed(trips: Sequence[RoundTrip], max_unchanged: float, translator: str) -> None:
    """Refuse a translator that left more than ``max_unchanged`` of the texts unchanged."""
    if not trips:
        return
    count = sum(unchanged(trip) for trip in trips)
    if count / len(trips) > max_unchanged:
        raise ValueError(
            f"translator={translator} returned {count} of {len(trips)} texts unchanged (more than "
            f"max_unchanged={max_unchanged:g}): the original and back-translated arms of slot guessing would be "
            "identical, so the test could not tell memorised wording from anything else. An identity translator "
            "is not a translator; use a real one (translator=marian) or check the translator's settings")


class Translator(ABC):
    name: str

    @abstractmethod
    def back_translate(self, examples: Sequence, field: str) -> list[RoundTrip]:
        """One round trip per example, in example order."""


def text_id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class CachedTextTranslator(Translator):
    """A translator of plain strings whose round trips are cached content-addressed."""

    def __init__(self, name: str, cache_dir: str | Path, shard_size: int = SHARD_SIZE):
        self.name = name
        self.cache_dir = Path(cache_dir)
        self.shard_size = shard_size

    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """Everything that can change a translation (part of the cache key)."""

    @abstractmethod
    def round_trip(self, texts: list[str]) -> list[tuple[str, str]]:
        """``(pivot, back)`` for each text, computed (never cached here)."""

    def back_translate(self, examples: Sequence, field: str) -> list[RoundTrip]:
        import pandas as pd

        from medexp.scoring.cache import ScoreCache
        from medexp.kernel.shards import ids_hash

        texts = [example_text(example, field) for example in examples]
        if not texts:
            return []
        distinct = list(dict.fromkeys(texts))
        ids = [text_id(text) for text in distinct]
        key = {"cache": "back_translation", "version": TRANSLATION_VERSION, "translator": self.settings(),
               "texts": ids_hash(ids)}

        def compute(start: int, stop: int) -> pd.DataFrame:
            pairs = self.round_trip(distinct[start:stop])
            if len(pairs) != stop - start:
                raise RuntimeError(f"translator={self.name} returned {len(pairs)} translations for "
                                   f"{stop - start} texts")
            return pd.DataFrame({"text_id": ids[start:stop], "source": distinct[start:stop],
                                 "pivot": [pivot for pivot, _ in pairs], "back": [back for _, back in pairs]})

        table = ScoreCache(self.cache_dir / "translations").get_or_compute(
            key, ids, "text_id", self.shard_size, compute, desc=f"back-translation ({self.name})")
        by_text = {source: RoundTrip(source, back, pivot)
                   for source, pivot, back in zip(table["source"], table["pivot"], table["back"])}
        return [by_text[text] for text in texts]
