"""A reply as a reader sees it before reading its answer: the model's own turn, without what it
echoed, and whether it is a refusal or noise.

- :func:`own_turn`: the reply without Markdown emphasis and surrounding quotes, from the start of the
  assistant's turn where the reply echoes its chat prompt (after the last ``[/INST]``, ``ASSISTANT:``),
  without role labels and chat tokens at its start (``Human:``, ``ASSISTANT:``, ``### Response:``, ``[/INST]``, ``<s>``),
  and cut where the model starts another turn (a later ``Human:`` / ``USER:`` / ``### Instruction``
  line): models continuing a conversation write both.
- :func:`without_echoes`: the turn without what it repeats of its prompt: the instructions
  ("Please choose from the following two options: [yes, no]", "Answer with the option's letter
  only."), the question itself at its start, and an option list (two or more of the probe's option
  lines).
- :func:`refusal`, :func:`noise`, :func:`asks_back`: why a reply that commits to nothing says nothing
  (a refusal; a date, a file size, a copyright line, a link, no word at all; a question back).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Optional

_EMPHASIS = re.compile(r"[*`_]{1,3}(?=\S)|(?<=\S)[*`_]{1,3}")
_QUOTES = "\"'\u201c\u201d\u2018\u2019"
_ROLE = r"(?:human|user|assistant|gpt|ai|bot|model|system|patient|doctor|response|answer\s*from\s*\w+)"
_LEADING_LABEL = re.compile(
    rf"^\s*(?:<\|?/?(?:s|im_start|im_end|assistant|user|eot_id|start_header_id|end_header_id)\|?>|\[/?INST\]|"
    rf"<image>|<end_of_turn>|<start_of_turn>\s*model|#+\s*{_ROLE}\s*:?|{_ROLE}\s*:)\s*",
    re.IGNORECASE)
# A later turn: a role label starting a line, or written as a chat transcript writes it (capitalised).
_LATER_TURN = re.compile(r"\n\s*(?:#+\s*)?(?i:human|user|instruction)\s*:|\s(?:###\s*)?(?:Human|USER|User)\s*:|"
                         r"<\|im_end\|>|</s>|<\|eot_id\|>|<end_of_turn>")
_INSTRUCTIONS = re.compile(
    r"[^.!?\n]*\b(?:please\s+choose|choose\s+from\s+the\s+following|the\s+following\s+(?:two\s+|\w+\s+)?options|"
    r"answer\s+with\s+(?:the\s+option'?s?\s+letter|a\s+single\s+word)|options?\s*:\s*\[)[^\n]*", re.IGNORECASE)
# Where a reply that echoes its chat prompt starts the model's own answer: after the last of these.
_ASSISTANT_START = re.compile(r"\[/INST\]|<\|im_start\|>\s*assistant|<start_of_turn>\s*model|\bASSISTANT\s*:|"
                              r"<\|start_header_id\|>\s*assistant\s*<\|end_header_id\|>", re.IGNORECASE)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def own_turn(reply: Optional[str]) -> str:
    """The model's own turn of ``reply`` (see the module docstring)."""
    text = _EMPHASIS.sub("", _fold(reply or "")).strip()
    starts = list(_ASSISTANT_START.finditer(text))
    if starts:
        text = text[starts[-1].end():].strip()
    while True:
        stripped = _LEADING_LABEL.sub("", text, count=1).strip().strip(_QUOTES).strip()
        if stripped == text:
            break
        text = stripped
    later = _LATER_TURN.search(text, 1)
    if later is not None and later.start() > 0:
        text = text[:later.start()]
    return text.strip().strip(_QUOTES).strip()


def _normalised(text: str) -> str:
    return " ".join(re.sub(r"[^\w%]+", " ", _fold(text).casefold()).split())


def without_echoes(text: str, question: str, options: Optional[Sequence[str]] = None) -> str:
    """``text`` without the instructions, question and option list it repeats of its prompt."""
    text = _INSTRUCTIONS.sub(" ", text).strip()
    wanted = _normalised(question)
    if wanted:
        # The question repeated at the start of the reply ("Is there a mass? No, ...").
        for end in (match.end() for match in re.finditer(r"[?:\n]", text)):
            if _normalised(text[:end]) == wanted:
                text = text[end:].strip()
                break
    if options:
        listed = [line for line in text.splitlines()
                  if any(_normalised(line).endswith(_normalised(option)) and len(_normalised(line)) <=
                         len(_normalised(option)) + 4 for option in options)]
        if len(listed) >= 2:  # with the heading that introduced them
            text = "\n".join(line for line in text.splitlines()
                             if line not in listed and not re.fullmatch(r"\s*(?:options|choices)\s*:?\s*", line, re.I))
    return text.strip(" \n,;:-")


_REFUSALS = re.compile(
    r"\b(?:i\s*(?:'?m|am)\s+(?:sorry|afraid|not\s+(?:sure|able|certain|a\s+(?:doctor|radiologist))|unable)|"
    r"as\s+an\s+ai\b|i\s+(?:do\s+not|don'?t)\s+(?:know|have\s+(?:access|the\s+ability|enough))|"
    r"(?:can\s*not|can'?t|cannot|unable\s+to|not\s+able\s+to|could\s+not|couldn'?t|impossible\s+to|"
    r"not\s+possible\s+to|difficult\s+to|hard\s+to)\s+(?:\w+\s+){0,2}(?:see|view|access|determine|tell|assess|say|"
    r"answer|provide|identify|interpret|evaluate|make|be\s+certain|be\s+sure|diagnose|confirm|comment|"
    r"analy[sz]e|know)|"
    r"(?:can\s*not|cannot|can'?t)\s+be\s+(?:determined|assessed|evaluated|answered|confirmed|seen|ruled\s+out)|"
    r"please\s+(?:provide|upload|share|attach|consult)|no\s+image\s+(?:was\s+|is\s+)?(?:provided|attached|shown|given)|"
    r"without\s+(?:the|an|seeing\s+the|access\s+to\s+the)\s+image|not\s+enough\s+information|"
    r"insufficient\s+information|(?:unclear|uncertain|not\s+clear)\s+(?:whether|if|from))",
    re.IGNORECASE)


def refusal(text: str) -> Optional[str]:
    """The refusing phrase of ``text`` ("I'm sorry", "cannot determine", "without the image"), or None."""
    match = _REFUSALS.search(text)
    return match.group(0) if match else None


_NOISE = (
    (re.compile(r"\u00a9|\(c\)\s*\d{4}|\bcopyright\b|all\s+rights\s+reserved", re.IGNORECASE), "a copyright line"),
    (re.compile(r"https?://|\bwww\.", re.IGNORECASE), "a link"),
    (re.compile(r"^\W*\d+(?:\.\d+)?\s*(?:[kmgt]i?b|bytes?)\W*$", re.IGNORECASE), "a file size"),
    (re.compile(r"^\W*(?:\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
                r"\s+\d{1,2},?\s+\d{4}|\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+"
                r"\d{4})(?:[ t]\d{1,2}:\d{2}(?::\d{2})?)?(?:\s*(?:utc|gmt|z)?\s*(?:[+-]\d{1,2}(?::?\d{2})?)?)?\W*$",
                re.IGNORECASE), "a date"),
)


def noise(text: str, numeric_answer: bool = False) -> Optional[str]:
    """What ``text`` is when it answers nothing (a copyright line, a link, a file size, a date, no
    word at all; a bare number only when the answer is not a number), else None."""
    if not text.strip():
        return "an empty reply"
    for pattern, what in _NOISE:
        if pattern.search(text):
            return what
    if not re.search(r"[^\W\d_]{2,}", text) and not (numeric_answer and re.search(r"\d", text)):
        return "no word"
    return None


def asks_back(text: str) -> bool:
    """Whether ``text`` is a question (it ends with a question mark), not an answer."""
    return text.rstrip().endswith("?")
