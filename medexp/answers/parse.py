"""The strict reading of a reply: an option-letter parser and free-text matching (judge=exact,
:mod:`medexp.answers.judges.exact`; the other judges reuse its normalisation).

The anchors' harnesses counted a reply as correct when the gold text appeared anywhere in it
("no" matched "not") and took the first capital letter anywhere as the choice ("A mass is seen"
answered A). Here a reply must *be* an answer:

Letters (:func:`parse_letter`): the reply, after surrounding whitespace, quotes and Markdown
emphasis (``**``, backticks) are removed, is accepted when it is

- exactly one option's text (after :func:`normalise_answer`), e.g. "Pleural effusion." -> its letter;
- an optional answer prefix ("Answer:", "The answer is", "The correct option is", "Option",
  "Choice", "Final answer:"; case-insensitive, only at the start of the reply) followed by a
  letter token: ``B``, ``(B)``, ``[B]``, ``B.``, ``B)``, ``B:``, ``B,`` or ``B`` then a new line,
  then anything (an explanation, the option text);
- a bare letter followed by a space and text only when that text is the letter's own option text
  ("B Pleural effusion"), or, after an answer prefix, when the letter is upper case
  ("The answer is B because ...").

Letter tokens are case-insensitive ("b", "(b)", "b." are B), except that a lower-case letter
followed by a space and a word is read as the English article, never as an option ("a mass").
A reply is rejected (None) when it names another option letter as well (``(C)``, "Option C",
"or C", "A, B", a stand-alone capital letter of another option followed by punctuation or the
end), when its text after the letter is another option's text, when it negates its own letter
("Option B is wrong"), when the letter is not one of the probe's letters, when the letter is
part of a word ("Based on the image" is not B), and when it holds no letter at all.

Other labels (:func:`parse_choice`; a probe that shows 1, 2, 3 or i, ii, iii instead of A, B, C:
:attr:`medexp.probes.base.Probe.labels`): the same rules with the probe's own labels in place of
letters, read case-insensitively, and the result is the option's *position*, so that a judge
reports the positional letter whatever the labels. A number is never read inside a longer number
or a decimal ("12", "2.5 cm" name no 2), and a number followed by words is an answer only after an
answer prefix ("The answer is 2 because ..."; "2 masses" is none). A label the probe did not show is
no answer: "B" to a probe labelled 1, 2, 3 is not its second option (a model replying with the
letter it remembers shows up as a no-answer, not as a choice).

Free text: :func:`normalise_answer` then whole-answer equality (:func:`exact_match`) or ROUGE-L F1
(:func:`rouge_l`, the rouge-score package) against a threshold. Exact match is never substring
containment: gold "no" does not match "not", nor "no, there is a lesion" (use ``rouge_l`` to give
partial credit to longer replies).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence


_ARTICLES = frozenset({"a", "an", "the"})
_KEPT_PUNCTUATION = frozenset("%")  # "50%" and "50" are different answers
_NUMBER_WORDS = {word: str(value) for value, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}


def normalise_answer(text: str, number_words_to_digits: bool = True) -> str:
    """Lower case (Unicode case folding after NFKC), every punctuation character replaced by a
    space (so "3.5" stays apart from "35", "x-ray" becomes "x ray"), the articles a/an/the
    dropped, whitespace collapsed; with ``number_words_to_digits`` the words zero..twenty become
    digits ("two" == "2"). Symbols (°, +) and the percent sign are kept."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(char).startswith("P") and char not in _KEPT_PUNCTUATION else char
                   for char in text)
    words = [word for word in text.split() if word not in _ARTICLES]
    if number_words_to_digits:
        words = [_NUMBER_WORDS.get(word, word) for word in words]
    return " ".join(words)


def exact_match(reply: str, gold: str, number_words_to_digits: bool = True) -> bool:
    """Whole-answer equality after :func:`normalise_answer`; an empty reply never matches."""
    normalised = normalise_answer(reply, number_words_to_digits)
    return bool(normalised) and normalised == normalise_answer(gold, number_words_to_digits)


class _WordTokenizer:
    """Whitespace tokens of already normalised text. rouge-score's default tokenizer deletes every
    character outside [a-z0-9], so non-Latin answers would score 0 against anything."""

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return text.split()


@lru_cache(maxsize=1)
def _rouge_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False, tokenizer=_WordTokenizer())


def rouge_l(reply: str, gold: str, number_words_to_digits: bool = True) -> float:
    """ROUGE-L F1 of the normalised reply against the normalised gold (0.0 when either is empty)."""
    prediction = normalise_answer(reply, number_words_to_digits)
    target = normalise_answer(gold, number_words_to_digits)
    if not prediction or not target:
        return 0.0
    return float(_rouge_scorer().score(target, prediction)["rougeL"].fmeasure)


_EMPHASIS = re.compile(r"[*`]+")
_QUOTES = "\"'\u201c\u201d\u2018\u2019"
_PREFIX = re.compile(
    r"^(?:the\s+)?(?:(?:correct|final|best|right)\s+)?(?:answer|option|choice|letter)\b(?:\s+is\b)?\s*[:\-=]?\s*",
    re.IGNORECASE,
)
_SEPARATORS = ".:)],;-"
_NEGATED = re.compile(r"^\s*(?:is|was|seems|would\s+be)\s+(?:not|incorrect|wrong|false)\b", re.IGNORECASE)


@dataclass(frozen=True)
class LabelForms:
    """How a probe's option labels are written in a reply, as regular-expression pieces: ``written``,
    a label in any case; ``capital``, a label as no word is written (a capital letter, a number);
    ``bare_guard``, what may not follow a bare label (it would be part of a word, an abbreviation or
    a longer number); ``position``, a label as written (case folded) -> its option's position."""

    written: str
    capital: str
    bare_guard: str
    position: dict[str, int]

    def position_of(self, written: str) -> Optional[int]:
        return self.position.get(written.casefold())


@lru_cache(maxsize=64)
def label_forms(labels: tuple[str, ...]) -> LabelForms:
    """The forms of ``labels`` (in option order). Option letters A, B, ...: any letter is read as a
    label, then checked against the probe's (a bare letter is not part of a word, nor an abbreviation
    such as "e.g."). Other labels (1, 2, ...; i, ii, ...): only the probe's own, case-insensitive,
    longest first, so that "10" is never read as "1"; a number is never part of a decimal ("2.5 cm"
    names no 2)."""
    labels = tuple(str(label).strip() for label in labels)
    position = {label.casefold(): index for index, label in enumerate(labels)}
    if len(position) != len(labels):
        raise ValueError(f"option labels are read case-insensitively and must differ so, got {list(labels)}")
    joined = "".join(labels)
    if len(joined) == len(labels) and joined.isascii() and joined.isalpha() and joined.isupper():
        return LabelForms("[A-Za-z]", "[A-Z]", r"[A-Za-z0-9'\u2019]|\.[A-Za-z]", position)
    longest_first = sorted(labels, key=len, reverse=True)
    written = "|".join(re.escape(label) for label in longest_first)
    capitals = "|".join(re.escape(label.upper()) for label in longest_first)
    return LabelForms(f"(?i:{written})", rf"(?<!\d[.,])(?:{capitals})(?![.,]\d)",
                      r"[A-Za-z0-9'\u2019]|\.[A-Za-z0-9]", position)


@dataclass(frozen=True)
class _Grammar:
    """The strict parser's patterns for one set of labels: ``token``, a label at the start (bracketed,
    or bare); ``other``, another label named later (bracketed, after "option", after "or"/"and"/a
    comma, or a capital standing alone before punctuation or the end)."""

    forms: LabelForms
    token: re.Pattern
    other: re.Pattern


@lru_cache(maxsize=64)
def _grammar(labels: tuple[str, ...]) -> _Grammar:
    forms = label_forms(labels)
    label = forms.written
    token = re.compile(rf"^(?:\(\s*(?P<round>{label})\s*\)|\[\s*(?P<square>{label})\s*\]|"
                       rf"(?P<bare>{label})(?!{forms.bare_guard}))")
    # A lower-case label counts only when no word follows it (so "or a mass" names no option, "or a." does).
    other = re.compile(
        rf"[(\[]\s*({label})\s*[)\]]"
        rf"|\b(?:option|choice|answer|letter)\s*(?:is\s*)?[:\-]?\s*({label})(?![A-Za-z0-9'\u2019])"
        rf"|(?:,|/|&|\bor\b|\band\b)\s*({label})(?![A-Za-z0-9'\u2019])"
        rf"|(?<![A-Za-z0-9'\u2019])((?-i:{forms.capital}))(?=\s*(?:$|[.,;:!?)\]/]))",
        re.IGNORECASE,
    )
    return _Grammar(forms, token, other)


def _clean(reply: str) -> str:
    return _EMPHASIS.sub("", reply).strip().strip(_QUOTES).strip()


def _position_of_text(text: str, options: Optional[Sequence[str]]) -> Optional[int]:
    """The position of the one option whose normalised text equals the normalised ``text``."""
    if not options:
        return None
    normalised = normalise_answer(text)
    if not normalised:
        return None
    matches = [index for index, option in enumerate(options) if normalise_answer(option) == normalised]
    return matches[0] if len(matches) == 1 else None


def _names_another_label(rest: str, position: int, grammar: _Grammar, options: Optional[Sequence[str]]) -> bool:
    other = _position_of_text(rest, options)
    if other is not None and other != position:
        return True
    for match in grammar.other.finditer(rest):
        named = next(group for group in match.groups() if group is not None)
        if named.islower():
            following = rest[match.end():].lstrip()
            if following and following[0].isalnum():
                continue
        named_position = grammar.forms.position_of(named)
        if named_position is not None and named_position != position:
            return True
    return False


def parse_choice(reply: Optional[str], labels: Sequence[str], options: Optional[Sequence[str]] = None) -> Optional[int]:
    """The position (0, 1, ...) of the option ``reply`` gives, or None when it gives none or more
    than one (rules in the module docstring). ``labels`` are the labels the probe showed, in
    option order ("ABCD", or ("1", "2", "3")); ``options`` their texts in the same order, when
    known, so that a reply made of an option's text maps to its position."""
    if options is not None and len(options) != len(labels):
        raise ValueError(f"{len(options)} option texts for the {'letters' if isinstance(labels, str) else 'labels'} "
                         f"{labels!r}")
    grammar = _grammar(tuple(labels))
    text = _clean(reply or "")
    if not text:
        return None
    by_text = _position_of_text(text, options)
    if by_text is not None:
        return by_text
    prefix = _PREFIX.match(text)
    body = text[prefix.end():] if prefix else text
    if prefix:
        by_text = _position_of_text(body, options)
        if by_text is not None:
            return by_text
    token = grammar.token.match(body)
    if token is None:
        return None
    written = token.group("round") or token.group("square") or token.group("bare")
    position = grammar.forms.position_of(written)
    if position is None:
        return None
    tail = body[token.end():]
    bracketed = token.group("bare") is None
    on_its_own = not tail.strip() or tail[0] in _SEPARATORS or tail.lstrip(" \t").startswith("\n")
    if not (bracketed or on_its_own or tail[0].isspace()):
        return None  # "A/B", "A's"
    rest = tail.lstrip(_SEPARATORS + " \t\n")
    if options is not None and rest and normalise_answer(rest) == normalise_answer(options[position]):
        return position
    followed_by_words = not (bracketed or on_its_own)
    # After an answer prefix a label may be followed by words ("The answer is B because ..."),
    # unless it is written as a word could be ("the answer is a mass").
    if followed_by_words and not (prefix and not written.islower()):
        return None  # "A mass is seen", "B is right", "2 masses"
    if _NEGATED.match(tail) or _names_another_label(rest, position, grammar, options):
        return None
    return position


def parse_letter(reply: Optional[str], letters: str, options: Optional[Sequence[str]] = None) -> Optional[str]:
    """The option letter ``reply`` gives, or None (:func:`parse_choice` with the letters as labels).
    ``letters`` are the probe's letters ("ABCD")."""
    letters = letters.upper()
    position = parse_choice(reply, letters, options)
    return None if position is None else letters[position]
