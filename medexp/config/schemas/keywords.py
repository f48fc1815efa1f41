"""Where slot guessing takes its keywords from: one section embedded by the detectors that mask
words (``detector.keywords``). Every source works offline except spaCy, which needs a model the
user installed; sources combine (a word is a keyword when any enabled source names it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from medexp.config.ranges import at_least


@dataclass
class KeywordConfig:
    answers: bool = True  # the words of the benchmark's gold answers (its answer vocabulary)
    meta_fields: List[str] = field(default_factory=list)  # the words of these meta fields' values (organ, modality ...)
    words: List[str] = field(default_factory=list)  # an explicit word list
    # A spaCy pipeline name or directory (e.g. en_core_web_sm): its nouns, proper nouns, adjectives
    # and verbs (spacy_pos) are keywords too. None: no spaCy. spaCy is not a medexp dependency.
    spacy_model: Optional[str] = None
    spacy_pos: List[str] = field(default_factory=lambda: ["NOUN", "PROPN", "ADJ", "VERB"])
    # None: medexp's English function-word list (medexp.probes.keywords.STOP_WORDS); a list replaces it.
    stop_words: Optional[List[str]] = None
    extra_stop_words: List[str] = field(default_factory=list)  # added to the stop words either way
    min_length: int = at_least(2, 1)  # shorter words are never keywords ("CT" has two letters)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        """A source must be enabled (called by medexp.config.ranges.validate)."""
        if not (node.answers or node.meta_fields or node.words or node.spacy_model):
            return (f"{path}: no keyword source is enabled; set {path}.answers=true, list {path}.meta_fields "
                    f"or {path}.words, or name a {path}.spacy_model")
        if node.spacy_model is not None and not node.spacy_pos:
            return f"{path}.spacy_pos is empty: list the universal POS tags that make keywords (NOUN, ADJ, VERB ...)"
        return None
