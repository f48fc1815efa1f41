"""Keywords of a text: the words slot guessing may mask.

A *word* is a maximal run of letters and digits, joined by inner hyphens or apostrophes
("X-Ray", "T2-weighted", "patient's"), that holds at least one letter; words compare by Unicode
case folding. The same tokenisation finds keywords, finds their occurrences and masks them, so a
keyword always matches whole words only ("no" never matches inside "not" or "no-reflow").

A word is a keyword when it is at least ``min_length`` characters, not a stop word, and named by an
enabled source (:class:`medexp.config.schemas.keywords.KeywordConfig`):

* the answer vocabulary: every word of the examples' gold answers;
* meta fields: every word of the listed fields' values (organ, modality ...);
* an explicit word list;
* spaCy (optional): the words a user-installed spaCy pipeline tags with one of ``spacy_pos``
  (by default nouns, proper nouns, adjectives and verbs, the Stanford tagger classes MM-Detect
  used). A spaCy token is matched to a word by its text, so a word spaCy splits ("X-Ray" into
  "X", "-", "Ray") is a keyword only through another source.

The stop words (:data:`STOP_WORDS`) are English function words: articles, pronouns, auxiliaries,
modals, prepositions, conjunctions, question words and quantifiers. Content words that generic
lists also drop ("left", "side", "two", "front", "normal") stay, because in a medical question
they are what is worth guessing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

_WORD = re.compile(r"[^\W_]+(?:['\u2019\-][^\W_]+)*")
_LETTER = re.compile(r"[^\W\d_]")

STOP_WORDS = frozenset("""
a an the this that these those
i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
myself yourself himself herself itself ourselves themselves
am is are was were be been being do does did doing done have has had having
can could may might must shall should will would ought
not no nor yes
and or but if then than so because as while whereas though although unless until either neither both
of in on at by for with without within to from into onto upon over under above below between among
through during before after about against along around across behind beyond near toward towards via
per off out up down
what which who whom whose where when why how whether
all any each every some such other another own same more most less least much many few several
there here also very just only even too quite rather again ever still yet else
""".split())

Tagger = Callable[[str], list[tuple[str, str]]]  # text -> (token text, universal POS tag)


def word_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, folded word)`` of every word of ``text``, in order."""
    return [(match.start(), match.end(), match.group(0).casefold())
            for match in _WORD.finditer(str(text)) if _LETTER.search(match.group(0))]


def words(text: str) -> list[str]:
    """The folded words of ``text``, in order, repeats kept."""
    return [word for _, _, word in word_spans(text)]


@dataclass(frozen=True)
class KeywordSource:
    """Finds the keywords of a text (see the module docstring)."""

    vocabulary: frozenset[str]
    stop_words: frozenset[str] = STOP_WORDS
    min_length: int = 2
    tagger: Tagger | None = None
    pos: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.vocabulary and self.tagger is None:
            raise ValueError("a keyword source needs a vocabulary or a tagger; both are empty")
        if self.min_length < 1:
            raise ValueError(f"min_length must be >= 1, got {self.min_length}")

    def keywords(self, text: str) -> list[str]:
        """The folded keywords of ``text``, each once, in order of first appearance."""
        tagged = set()
        if self.tagger is not None:
            tagged = {token.casefold() for token, pos in self.tagger(text) if pos in self.pos}
        found: list[str] = []
        for word in words(text):
            if word in found or len(word) < self.min_length or word in self.stop_words:
                continue
            if word in self.vocabulary or word in tagged:
                found.append(word)
        return found


def vocabulary(texts: Iterable[str]) -> frozenset[str]:
    """Every folded word of ``texts``."""
    return frozenset(word for text in texts for word in words(text))


def meta_values(examples: Sequence, fields: Sequence[str]) -> list[str]:
    """The values of the meta ``fields`` over ``examples`` (list values element by element); a
    field that no example has is an error naming the meta fields the examples do have."""
    values: list[str] = []
    for name in fields:
        present = [example.meta[name] for example in examples if example.meta.get(name) is not None]
        if not present:
            known = sorted({key for example in examples for key in example.meta})
            raise ValueError(f"keywords.meta_fields names {name!r}, which no example has; "
                             f"the examples' meta fields are {known}")
        for value in present:
            values.extend(str(item) for item in (value if isinstance(value, (list, tuple)) else [value]))
    return values


def keyword_source(cfg, examples: Sequence) -> KeywordSource:
    """The keyword source ``cfg`` (a :class:`~medexp.config.schemas.keywords.KeywordConfig` or
    its node) describes, with the answer and meta vocabularies read from ``examples``."""
    texts: list[str] = []
    if cfg.answers:
        texts.extend(str(example.answer) for example in examples)
    texts.extend(meta_values(examples, list(cfg.meta_fields)))
    texts.extend(str(word) for word in cfg.words)
    stop = frozenset(words(" ".join(cfg.stop_words))) if cfg.stop_words is not None else STOP_WORDS
    stop |= frozenset(words(" ".join(cfg.extra_stop_words)))
    tagger = spacy_tagger(cfg.spacy_model) if cfg.spacy_model else None
    return KeywordSource(vocabulary(texts), stop, int(cfg.min_length), tagger, frozenset(cfg.spacy_pos))


def spacy_tagger(model: str) -> Tagger:
    """A tagger from the spaCy pipeline ``model`` (an installed package name or a directory)."""
    try:
        import spacy
    except ImportError:
        raise ImportError(
            f"keywords.spacy_model={model!r} needs spaCy, which medexp does not install: "
            f"pip install spacy && python -m spacy download {model}  (or set keywords.spacy_model=null)"
        ) from None
    try:
        pipeline = spacy.load(model)
    except OSError as error:
        raise OSError(
            f"keywords.spacy_model={model!r}: no such spaCy pipeline is installed ({error}). Install it with "
            f"python -m spacy download {model}, or point keywords.spacy_model at a pipeline directory"
        ) from None
    if "tagger" not in pipeline.pipe_names and "morphologizer" not in pipeline.pipe_names:
        raise ValueError(f"keywords.spacy_model={model!r} has no tagger or morphologizer (pipes: "
                         f"{pipeline.pipe_names}), so it assigns no part-of-speech tags")

    def tag(text: str) -> list[tuple[str, str]]:
        return [(token.text, token.pos_) for token in pipeline(text)]

    return tag
