"""``judge=read``: the answer a reply commits to, read as a careful reader reads it, without a model.

The reply is first reduced to the model's own turn without its echoes
(:mod:`medexp.answers.judges.replies`); words are compared as terms
(:mod:`medexp.answers.judges.terms`: abbreviations, spellings, plurals, numbers and units folded).
Then, by the kind of question:

- **Multiple choice** (the probe has options): the strict letter parser first ("B", "(B)",
  "Answer: B", "B. <its text>"); then one letter the reply names as its answer ("the answer is
  (C)", "I would choose B"); for yes/no options, the yes/no reading below; then the one option whose
  text it states and does not negate ("It is a pleural effusion", the longest option winning over
  one it contains); a refusal is the probe's refusal option where it has one. A probe that shows
  other labels (1, 2, 3: :attr:`medexp.probes.base.Probe.labels`) is read in those ("2", "(2)",
  "Option 2", "the answer is 2"), a letter it did not show being no label of it ("B" to a numbered
  probe is a no-answer); the answer is committed as the option's positional letter either way.
- **Yes/no** (a free-text probe whose gold is yes or no, asked with an auxiliary verb or marked
  CLOSED): a leading yes or no after a lead-in ("Based on the image, no."), else the asked finding
  restated: the question's content words ("Is there evidence of an aortic aneurysm?" -> aortic,
  aneurysm) named in the reply, at least ``finding_coverage`` of them, as present or as absent
  ("there is no evidence of an aortic aneurysm", "calcifications are not present", "the liver is
  abnormal" for "Is the liver normal?"), outside hedged, refusing or questioning sentences.
- **Either-or** ("Is this a CT or MRI?", "bilateral or unilateral?", gold one of the two): the one
  alternative the reply names and does not negate ("It is an MRI, not a CT." -> mri).
- **Open**: correct when every content word of the gold (numbers with their units) stands in the
  reply as a whole term, not negated, and the reply names no rival from the gold's contrast set
  ("left and right" for gold "left" is both); never a substring ("no" is not in "normal"); a bare
  yes or no answers another question.

A reply that commits to nothing is a no-answer, with why: a refusal, both answers, a hedge, a
question back, noise (a date, a file size, a copyright line, a link), or another question answered.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional

from medexp.answers.judges.base import JudgeDeclaration, Reading, judged, judged_option, no_answer, per_reply
from medexp.answers.judges.replies import asks_back, noise, own_turn, refusal, without_echoes
from medexp.answers.judges.terms import CONTRASTS, find, negated_at, terms
from medexp.answers.parse import label_forms, parse_choice
from medexp.config.schemas.judge import JudgeKind, ReadJudgeConfig

YES, NO = "yes", "no"
_ANSWER_WORDS = {"yes": YES, "yeah": YES, "yep": YES, "yup": YES, "no": NO, "nope": NO}
_LEAD_IN = re.compile(
    r"^(?:(?:based\s+on|according\s+to|from|looking\s+at|upon|after|given|judging\s+(?:by|from)|on|in)\b[^,.;:!?]{0,80},"
    r"\s*|(?:well|so|okay|ok|hmm|sure|certainly)\b[,.!]?\s*|i\s+(?:think|believe|would\s+say|can\s+(?:say|confirm))"
    r"(?:\s+that)?\s*[,:]?\s*|(?:my\s+|the\s+)?(?:short\s+|final\s+|correct\s+|best\s+)?answer(?:\s+to\s+(?:the|this|your)"
    r"\s+question)?(?:\s+is)?\s*[:\-]?\s*)", re.IGNORECASE)
_AUXILIARIES = frozenset({"is", "are", "was", "were", "does", "do", "did", "can", "could", "has", "have", "had",
                          "will", "would", "should", "shall", "may", "might", "must"})
# Words a question is built with, not what it asks about.
_SCAFFOLD = frozenset({
    "there", "this", "that", "these", "those", "it", "its", "any", "evidence", "sign", "of", "in", "on", "at", "to",
    "for", "with", "by", "from", "into", "image", "picture", "photo", "film", "study", "seen", "visible", "visualized",
    "visualised", "shown", "noted", "present", "presence", "identified", "demonstrated", "appreciated", "observed",
    "see", "here", "be", "been", "being", "than", "and", "also", "patient", "finding", "what", "which", "where", "how",
    "please", "answer", "question", "one", "we", "you", "our", "represent", "show", "demonstrate", "depict", "reveal",
    "indicate", "display", "contain", "appear", *_AUXILIARIES})
_HEDGES = re.compile(r"\b(?:may|might|possibly|possible|perhaps|could\s+be|cannot\s+(?:be\s+)?rule[ds]?\s+out|"
                     r"can't\s+(?:be\s+)?rule[ds]?\s+out|questionable|equivocal|unclear|uncertain|not\s+sure)\b",
                     re.IGNORECASE)
_ANTONYM_PREFIXES = ("ab", "un", "non", "in", "im", "dis")


@lru_cache(maxsize=64)
def _label_patterns(labels: tuple[str, ...]) -> tuple[re.Pattern, re.Pattern]:
    """For a probe's option labels: a label the reply names as its answer ("the answer is (C)",
    "I would choose B"; a capital or a number, except after answer/option/choice), and a reply made
    of labels only ("A or B", "2, 3")."""
    forms = label_forms(labels)
    named = re.compile(
        rf"\b(?i:answer|option|choice)\b\s*(?i:is\s*)?[:\-]?\s*\(?({forms.written})\)?(?![\w'])|\(({forms.capital})\)|"
        rf"\b(?i:it'?s|it\s+is|is|choose|pick|select|go\s+with)\s+\(?({forms.capital})\)?(?![\w'])")
    only = re.compile(rf"\W*{forms.written}\W*(?:(?:or|and|,|/|&)\W*{forms.written}\W*)+", re.IGNORECASE)
    return named, only


def _without_lead_in(text: str) -> str:
    while True:
        stripped = _LEAD_IN.sub("", text, count=1).lstrip()
        if stripped == text:
            return text
        text = stripped


def leading_answer(text: str) -> tuple[Optional[str], str]:
    """``(yes|no|None, reason)``: the yes or no a reply opens with, after a lead-in; None with a
    reason when it opens with both ("Yes and no")."""
    words = re.findall(r"[^\W\d_]+", _without_lead_in(text).casefold())
    if not words or words[0] not in _ANSWER_WORDS:
        return None, ""
    answer = _ANSWER_WORDS[words[0]]
    if any(_ANSWER_WORDS.get(word) not in (None, answer) for word in words[1:4]) and \
            any(word in ("and", "or") for word in words[1:3]):
        return None, "opens with both yes and no"
    return answer, f"leading {answer}"


def question_finding(question: str) -> list[str]:
    """The content terms of a yes/no question: what it asks to be present or absent."""
    asked = [part for part in re.split(r"(?<=[?])\s+", question.strip()) if part.strip()]
    found = []
    for term in terms(asked[-1] if asked else question):
        if term not in _SCAFFOLD and term not in found and term not in (YES, NO, "or", "not", "no"):
            found.append(term)
    return found


def _spoken_sentences(text: str) -> list[tuple[str, bool]]:
    """``(sentence, usable)``: a sentence that asks, refuses or hedges commits to nothing."""
    out = []
    for match in re.finditer(r"[^.!?;\n]+(?:[.!?;]+|\n|$)", text):
        sentence = match.group(0).strip()
        if sentence:
            out.append((sentence, not (asks_back(sentence) or refusal(sentence) or _HEDGES.search(sentence))))
    return out


def _mentions(clause: list[str], term: str) -> list[bool]:
    """For each mention of ``term`` in ``clause``: whether it says the term holds (True) or not
    (a negated mention, or a mention of its antonym such as "abnormal" for "normal")."""
    said = [not negated_at(clause, position) for position in find(clause, [term])]
    if len(term) >= 4:
        for prefix in _ANTONYM_PREFIXES:
            said += [negated_at(clause, position) for position in find(clause, [prefix + term])]
    return said


def restated(text: str, finding: list[str], coverage: float) -> tuple[Optional[str], str]:
    """``(yes|no|None, reason)``: the finding restated as present or absent (see the module docstring)."""
    if not finding:
        return None, ""
    said: dict[str, list[bool]] = {}
    hedged = False
    for sentence, usable in _spoken_sentences(text):
        clause = terms(sentence)
        for term in finding:
            mentions = _mentions(clause, term)
            if mentions and not usable:
                hedged = True
            elif mentions:
                said.setdefault(term, []).extend(mentions)
    if len(said) < max(1, coverage * len(finding) - 1e-9):
        return None, "hedges or refuses on the asked finding" if hedged else ""
    if any(len(set(values)) > 1 for values in said.values()):
        return None, "states the finding both present and absent"
    absent = any(not value for values in said.values() for value in values)
    return (NO, "restates the finding as absent") if absent else (YES, "restates the finding as present")


def read_yes_no(text: str, question: str, coverage: float) -> tuple[Optional[str], str]:
    """The yes or no ``text`` commits to for ``question``, or None with why not."""
    answer, reason = leading_answer(text)
    if answer is not None or reason:
        return answer, reason
    return restated(text, question_finding(question), coverage)


def _content(text: str) -> list[str]:
    words = [term for term in terms(text) if term not in _SCAFFOLD]
    return words or terms(text)


def alternatives(question: str, gold: str) -> Optional[list[list[str]]]:
    """The alternatives of an either-or question ("Is this a CT or MRI?" -> [ct], [mri]) when the
    gold is one of them; None for any other question."""
    match = re.match(r"^(.*)\bor\b(.*?)$", question.strip().rstrip("?. "), re.IGNORECASE | re.DOTALL)
    if match is None:
        return None
    after = _trimmed(terms(match.group(2)))
    if not after:
        return None
    pieces = [piece for piece in match.group(1).split(",") if piece.strip()]
    before = [_trimmed(terms(piece)) for piece in pieces[1:]] if len(pieces) > 1 else []
    head = _trimmed(terms(pieces[0] if pieces else match.group(1)))
    options = [head[-len(after):], *before, after]
    if any(not option for option in options) or (terms(gold) not in options and _content(gold) not in options):
        return None
    return options


def _trimmed(words: list[str]) -> list[str]:
    while words and words[0] in _SCAFFOLD:
        words = words[1:]
    while words and words[-1] in _SCAFFOLD:
        words = words[:-1]
    return words


def clauses(text: str) -> list[list[str]]:
    """The terms of each sentence of ``text`` (ends: . ! ? ; or a line break, a decimal point not one)."""
    return [terms(part) for part in re.split(r"(?<!\d)[.!?;]+(?!\d)|\n+", text) if part.strip()]


def _stated(sentences: list[list[str]], phrase: list[str]) -> list[tuple[int, int, int]]:
    """The spans (sentence, start, stop) where ``phrase`` stands in the reply, not negated."""
    return [(number, position, position + len(phrase)) for number, clause in enumerate(sentences)
            for position in find(clause, phrase) if not negated_at(clause, position)]


def _one_stated(sentences: list[list[str]], phrases: list[list[str]]) -> tuple[Optional[int], str]:
    """The index of the one phrase the reply states (a phrase found only inside a longer stated
    one does not count), None and why when it states none or several."""
    spans = {index: _stated(sentences, phrase) for index, phrase in enumerate(phrases)}
    longer = [span for found in spans.values() for span in found]
    named = [index for index, found in spans.items()
             if any(not any(where == there and a <= start and stop <= b and (b - a) > (stop - start)
                            for there, a, b in longer)
                    for where, start, stop in found)]
    if len(named) == 1:
        return named[0], ""
    return None, "names several answers" if named else ""


def _uncommitted(text: str, numeric: bool = False) -> Reading:
    """The no-answer of a reply that commits to nothing, with why."""
    refused = refusal(text)
    if refused:
        return no_answer(f"refusal ({refused!r})")
    what = noise(text, numeric)
    if what:
        return no_answer(f"answers nothing: {what}")
    if asks_back(text):
        return no_answer("asks a question instead of answering")
    return no_answer("does not answer the question asked")


def read_choice(probe, text: str, cfg) -> Reading:
    """A reply to a multiple-choice probe, read in the labels its prompt showed; committed as the
    option's positional letter (gold and refusal are positional too)."""
    labels = probe.shown_labels
    position = parse_choice(text, labels, probe.options)
    if position is not None:
        return judged_option(probe, position, "option letter" if probe.labels is None else "option label")
    named_label, labels_only = _label_patterns(tuple(labels))
    if labels_only.fullmatch(text):
        return no_answer("names several options")
    forms = label_forms(tuple(labels))
    named = {forms.position_of(group) for match in named_label.finditer(text) for group in match.groups() if group}
    named.discard(None)
    if len(named) > 1:
        return no_answer(f"names several options ({', '.join(labels[index] for index in sorted(named))})")
    if len(named) == 1:
        position = named.pop()
        return judged_option(probe, position, f"names option {labels[position]}")
    texts = [" ".join(terms(option)) for option in probe.options]
    if sorted(texts) == [NO, YES]:
        answer, reason = read_yes_no(text, probe.question, float(cfg.finding_coverage))
        if answer is not None:
            return judged_option(probe, texts.index(answer), reason)
        if reason:
            return no_answer(reason)
    index, why = _one_stated(clauses(text), [_content(option) for option in probe.options])
    if index is not None:
        return judged_option(probe, index, "states the option's text")
    if why:
        return no_answer(why)
    if probe.refusal is not None and refusal(text):
        return judged(probe.refusal, probe.refusal == probe.gold, "a refusal, read as the refusal option")
    return _uncommitted(text)


def _is_yes_no(probe) -> bool:
    from medexp.probes.choice import EXAMPLE_META

    if " ".join(terms(probe.gold)) not in (YES, NO):
        return False
    opening = terms(probe.question)[:1]
    closed = str(probe.meta.get(EXAMPLE_META, {}).get("answer_type", "")).strip().upper() == "CLOSED"
    return closed or (bool(opening) and opening[0] in _AUXILIARIES)


def read_open(probe, text: str) -> Reading:
    gold = _content(probe.gold)
    reply = terms(text)
    sentences = clauses(text)
    numeric = any(re.fullmatch(r"\d+(?:\.\d+)?", word) for word in gold)
    stated = [bool(_stated(sentences, [word])) for word in gold]
    committed = " ".join(reply)[:80]
    if not all(stated):
        if not reply or refusal(text) or noise(text, numeric) or asks_back(text):
            return _uncommitted(text, numeric)
        if all(word in _ANSWER_WORDS for word in re.findall(r"[^\W\d_]+", _without_lead_in(text).casefold())):
            return no_answer("answers yes or no to an open question")  # "Nope!" to "Where is the mass?"
        return judged(committed, False, "the gold's words are not all stated")
    for word in gold:
        rivals = {other for group in CONTRASTS if word in group for other in group - {word}
                  if _stated(sentences, [other])}
        if rivals:
            return no_answer(f"names both {word} and {', '.join(sorted(rivals))}")
    numbers = {word for word in reply if re.fullmatch(r"\d+(?:\.\d+)?", word) and _stated(sentences, [word])}
    if numeric and len(numbers - set(gold)) > 0 and len(numbers) > 1:
        return no_answer(f"names several numbers ({', '.join(sorted(numbers))})")
    return judged(" ".join(gold), True, "states the gold's words")


def read_reply(probe, reply: str, cfg) -> Reading:
    """What ``reply`` commits to for ``probe`` (see the module docstring)."""
    text = without_echoes(own_turn(reply), probe.question, probe.options)
    if not text:
        return no_answer("an empty reply" if not own_turn(reply) else "only repeats its prompt")
    if probe.is_choice:
        return read_choice(probe, text, cfg)
    if _is_yes_no(probe):
        answer, reason = read_yes_no(text, probe.question, float(cfg.finding_coverage))
        if answer is None:
            return no_answer(reason) if reason and not refusal(text) else _uncommitted(text)
        return judged(answer, answer == " ".join(terms(probe.gold)), reason)
    options = alternatives(probe.question, probe.gold)
    if options is not None:
        index, why = _one_stated(clauses(text), options)
        if index is None:
            return no_answer(f"{why} of the question's alternatives") if why else _uncommitted(text)
        answer = " ".join(options[index])
        return judged(answer, options[index] in (terms(probe.gold), _content(probe.gold)), "names one alternative")
    return read_open(probe, text)


JUDGE = JudgeDeclaration(kind=JudgeKind.read.value, schema=ReadJudgeConfig, judge=per_reply(read_reply))
