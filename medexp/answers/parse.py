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

Free text: :func:`normalise_answer` then whole-answer equality (:func:`exact_match`) or ROUGE-L F1
(:func:`rouge_l`, the rouge-score package) against a threshold. Exact match is never substring
containment: gold "no" does not match "not", nor "no, there is a lesion" (use ``rouge_l`` to give
partial credit to longer replies).
"""

from __future__ import annotations

import re
import unicodedata
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
# A letter token at the start: bracketed, or a bare letter that is not part of a word and not an
# abbreviation such as "e.g.".
_TOKEN = re.compile(r"^(?:\(\s*(?P<round>[A-Za-z])\s*\)|\[\s*(?P<square>[A-Za-z])\s*\]|(?P<bare>[A-Za-z])(?![A-Za-z0-9'\u2019]|\.[A-Za-z]))")
_SEPARATORS = ".:)],;-"
_NEGATED = re.compile(r"^\s*(?:is|was|seems|would\s+be)\s+(?:not|incorrect|wrong|false)\b", re.IGNORECASE)
# Other letters named in the text after the chosen one. Group 1 is the letter; a lower-case one
# counts only when no word follows it (so "or a mass" names no option, "or a." does).
_OTHER_LETTER = re.compile(
    r"[(\[]\s*([A-Za-z])\s*[)\]]"
    r"|\b(?:option|choice|answer|letter)\s*(?:is\s*)?[:\-]?\s*([A-Za-z])(?![A-Za-z0-9'\u2019])"
    r"|(?:,|/|&|\bor\b|\band\b)\s*([A-Za-z])(?![A-Za-z0-9'\u2019])"
    r"|(?<![A-Za-z0-9'\u2019])((?-i:[A-Z]))(?=\s*(?:$|[.,;:!?)\]/]))",
    re.IGNORECASE,
)


def _clean(reply: str) -> str:
    return _EMPHASIS.sub("", reply).strip().strip(_QUOTES).strip()


def _letter_of_text(text: str, letters: str, options: Optional[Sequence[str]]) -> Optional[str]:
    """The letter of the one option whose normalised text equals the normalised ``text``."""
    if not options:
        return None
    normalised = normalise_answer(text)
    if not normalised:
        return None
    matches = [letter for letter, option in zip(letters, options) if normalise_answer(option) == normalised]
    return matches[0] if len(matches) == 1 else None


def _names_another_letter(rest: str, letter: str, letters: str, options: Optional[Sequence[str]]) -> bool:
    other = _letter_of_text(rest, letters, options)
    if other is not None and other != letter:
        return True
    for match in _OTHER_LETTER.finditer(rest):
        named = next(group for group in match.groups() if group is not None)
        if named.islower():
            following = rest[match.end():].lstrip()
            if following and following[0].isalnum():
                continue
        if named.upper() in letters and named.upper() != letter:
            return True
    return False


def parse_letter(reply: Optional[str], letters: str, options: Optional[Sequence[str]] = None) -> Optional[str]:
    """The option letter ``reply`` gives, or None when it gives none or more than one (rules in
    the module docstring). ``letters`` are the probe's letters ("ABCD"); ``options`` their texts
    in the same order, when known, so that a reply made of an option's text maps to its letter."""
    letters = letters.upper()
    if options is not None and len(options) != len(letters):
        raise ValueError(f"{len(options)} option texts for the letters {letters!r}")
    text = _clean(reply or "")
    if not text:
        return None
    by_text = _letter_of_text(text, letters, options)
    if by_text is not None:
        return by_text
    prefix = _PREFIX.match(text)
    body = text[prefix.end():] if prefix else text
    if prefix:
        by_text = _letter_of_text(body, letters, options)
        if by_text is not None:
            return by_text
    token = _TOKEN.match(body)
    if token is None:
        return None
    written = token.group("round") or token.group("square") or token.group("bare")
    letter = written.upper()
    if letter not in letters:
        return None
    tail = body[token.end():]
    bracketed = token.group("bare") is None
    on_its_own = not tail.strip() or tail[0] in _SEPARATORS or tail.lstrip(" \t").startswith("\n")
    if not (bracketed or on_its_own or tail[0].isspace()):
        return None  # "A/B", "A's"
    rest = tail.lstrip(_SEPARATORS + " \t\n")
    if options is not None and rest and normalise_answer(rest) == normalise_answer(options[letters.index(letter)]):
        return letter
    followed_by_words = not (bracketed or on_its_own)
    if followed_by_words and not (prefix and written.isupper()):
        return None  # "A mass is seen", "B is right", "the answer is a mass"
    if _NEGATED.match(tail) or _names_another_letter(rest, letter, letters, options):
        return None
    return letter
