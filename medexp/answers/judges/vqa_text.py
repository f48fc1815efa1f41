"""The answer normalisation of the VQA evaluation script, which LLaVA-Med's ``run_eval.py``
(``normalize_word``) and VLMEvalKit (``process_punctuation``, ``process_answer``) both carry: the
behaviour, quirks included, so that the harness judges reproduce their published figures.

- Punctuation: each of ``; / [ ] " { } ( ) = + \\ _ - > < @ ` , ? !`` is deleted where it touches a
  space (or anywhere, once the text holds a comma between digits), else replaced by a space.
- Periods: a period not followed by a digit is deleted, at most 32 of them (the script passes
  ``re.UNICODE``, 32, where ``re.sub`` takes its count).
- Words (:func:`vqa_words`): lower-cased, number words zero..ten (and "none") as digits, the
  articles dropped, contractions written without their apostrophe restored ("dont" -> "don't").
"""

from __future__ import annotations

import re

_PUNCTUATION = (";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",",
                "?", "!")
_COMMA_BETWEEN_DIGITS = re.compile(r"(\d)(,)(\d)")
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")
_PERIODS_STRIPPED = 32
_NUMBERS = {"none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
            "seven": "7", "eight": "8", "nine": "9", "ten": "10"}
_ARTICLES = ("a", "an", "the")
_CONTRACTIONS = {word.replace("'", ""): word for word in (
    "ain't aren't can't could've couldn't didn't doesn't don't hadn't hasn't haven't he'd he's how'd how'll how's "
    "i'm i've isn't it'd it'll mightn't might've mustn't must've needn't shan't she'd she's should've shouldn't "
    "that's there'd there're there's they'd they'll they're they've wasn't we've weren't what'll what're what's "
    "what've when's where'd where's where've who'd who'll who's who've why'll why're why's won't would've "
    "wouldn't y'all you'd you'll you're you've").split()}


def vqa_punctuation(text: str) -> str:
    """``text`` with the VQA script's punctuation and period handling (see the module docstring)."""
    out = text
    for mark in _PUNCTUATION:
        if (mark + " " in text or " " + mark in text) or _COMMA_BETWEEN_DIGITS.search(text) is not None:
            out = out.replace(mark, "")
        else:
            out = out.replace(mark, " ")
    return _PERIOD.sub("", out, count=_PERIODS_STRIPPED)


def vqa_words(text: str) -> list[str]:
    """The words of ``text`` after :func:`vqa_punctuation`, as the VQA script normalises them."""
    words = [_NUMBERS.get(word, word) for word in vqa_punctuation(text).lower().split()]
    return [_CONTRACTIONS.get(word, word) for word in words if word not in _ARTICLES]


def vqa_normalise(text: str) -> str:
    """:func:`vqa_words` joined by spaces, commas removed (LLaVA-Med's ``normalize_word``)."""
    return " ".join(vqa_words(text)).replace(",", "")
