"""MM-Detect's slot guessing: one keyword masked in a text and in its back-translation.

For each example, from its text (the question, or a caption field) and the text's round trip
through a translator (:mod:`medexp.translators`):

* the candidates are the keywords of the original text (:mod:`medexp.probes.keywords`) that also
  occur as a whole word, case aside, in the back-translated text;
* one candidate is picked from the example's own stream (``derive_seed(seed, example_id,
  "slot_mask")``), and *that word* is masked in both texts: every whole-word occurrence of it
  becomes the mask token, so the answer is never left visible elsewhere in the text;
* ``slot_mask`` asks for the word in the original text, ``back_translation`` in the
  back-translated text; both keep the example's image and are rendered from one template
  (``{text}`` the masked text, ``{mask}`` the mask token), so the arms differ only in wording.
  The gold is the masked word as the original text writes it, judged as free text.

An example whose back-translation has the same words as the original (the arms would be
identical), or that shares no keyword with it, is skipped with its reason and counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from medexp.config.wording import DEFAULT_MASK, DEFAULT_TEMPLATE, check_template
from medexp.kernel.hashing import derive_seed
from medexp.probes.base import Probe
from medexp.probes.choice import EXAMPLE_META, example_meta
from medexp.probes.keywords import KeywordSource, word_spans, words
from medexp.probes.sets import ProbeSet

SLOT_MASK = "slot_mask"
BACK_TRANSLATION = "back_translation"


@dataclass(frozen=True)
class SlotSettings:
    seed: int
    template: str = DEFAULT_TEMPLATE
    mask: str = DEFAULT_MASK

    def __post_init__(self) -> None:
        check_template(self.template, self.mask)


def mask_word(text: str, word: str, mask: str = DEFAULT_MASK) -> tuple[str, str, int]:
    """``(masked text, the word as first written, occurrences)``: every whole-word occurrence of
    ``word`` (compared by case folding) replaced by ``mask``."""
    folded = word.casefold()
    spans = [(start, end) for start, end, found in word_spans(text) if found == folded]
    if not spans:
        raise ValueError(f"{word!r} does not occur as a word in {text!r}")
    pieces, last = [], 0
    for start, end in spans:
        pieces.extend([text[last:start], mask])
        last = end
    pieces.append(text[last:])
    first_start, first_end = spans[0]
    return "".join(pieces), text[first_start:first_end], len(spans)


def shared_keywords(original: str, back: str, source: KeywordSource) -> list[str]:
    """The keywords of ``original`` that occur as words of ``back``, in order of first appearance."""
    present = set(words(back))
    return [word for word in source.keywords(original) if word in present]


def slot_probes(examples: Sequence, texts: Sequence[str], backs: Sequence[str], source: KeywordSource,
                settings: SlotSettings) -> ProbeSet:
    """Per example its ``slot_mask`` and ``back_translation`` probes (example order kept).

    ``texts[i]`` is example i's original text (its question or caption), ``backs[i]`` its
    back-translation.
    """
    if not len(examples) == len(texts) == len(backs):
        raise ValueError(f"{len(examples)} examples, {len(texts)} texts and {len(backs)} back-translations")
    out = ProbeSet()
    for example, original, back in zip(examples, texts, backs):
        skip_id = f"{example.example_id}::{SLOT_MASK}"
        if words(original) == words(back):
            out.skipped.append((skip_id, "unchanged: the back-translation has the original's words"))
            continue
        candidates = shared_keywords(original, back, source)
        if not candidates:
            keywords = source.keywords(original)
            detail = f"none of the keywords {keywords[:6]} occurs in it" if keywords else "the text has no keyword"
            out.skipped.append((skip_id, f"no shared keyword: {detail} (back-translation {back!r})"))
            continue
        rng = np.random.default_rng(derive_seed(settings.seed, example.example_id, SLOT_MASK))
        word = candidates[int(rng.integers(len(candidates)))]
        masked_original, gold, n_original = mask_word(original, word, settings.mask)
        masked_back, _, n_back = mask_word(back, word, settings.mask)
        meta = {"masked_word": word, "candidates": candidates, EXAMPLE_META: example_meta(example)}
        for kind, text, masked, count in ((SLOT_MASK, original, masked_original, n_original),
                                          (BACK_TRANSLATION, back, masked_back, n_back)):
            out.probes.append(Probe(
                probe_id=f"{example.example_id}::{kind}", example_id=example.example_id, kind=kind,
                question=settings.template.format(text=masked, mask=settings.mask), gold=gold, image=example.image,
                meta={**meta, "text": text, "n_masked": count},
            ))
    return out
