"""``judge=vlmevalkit``: VLMEvalKit's exact-matching metric (open-compass/VLMEvalKit), so that
numbers compare with its leaderboards.

- Yes/no (a yes/no gold, as text or as the options Yes/No): ``YOrN_Extraction``: the reply's
  words after VQA punctuation (:mod:`medexp.answers.judges.vqa_text`), lower case; ``yes`` without
  ``no`` is Yes, ``no`` without ``yes`` is No, anything else Unknown (a no-answer here, scored wrong
  by VLMEvalKit as by medexp).
- Multiple choice: ``can_infer``: first the option letter, when exactly one of the probe's letters
  stands as a word of the reply once ``.()[],:;!*#{}`` are spaces (a letter used as an article
  counts: "A mass" answers A); a reply holding one of its refusal phrases, or the letter Z alone, is
  Z (no answer); "Failed to obtain answer via API" is none. Then the option text: exactly one
  option's text, lower case, a substring of the reply. A probe showing other labels (1, 2, 3) is
  read with those as ``can_infer``'s choices, VLMEvalKit's arithmetic unchanged ("2" is a word of
  "The answer is 2."); the choice is committed as the option's positional letter.
- Open: the VQA-normalised reply equals the VQA-normalised gold (``process_answer``).
"""

from __future__ import annotations

import re

from medexp.answers.judges.base import JudgeDeclaration, Reading, judged, judged_option, no_answer, per_reply
from medexp.answers.judges.vqa_text import vqa_punctuation, vqa_words
from medexp.benchmarks.options import LETTERS
from medexp.config.schemas.judge import JudgeKind, VlmevalkitJudgeConfig

_API_FAILURE = "Failed to obtain answer via API"
_REFUSALS = ("Sorry, I can't help with images of people yet.", "I can't process this file.",
             "I'm sorry, but without the image provided", "Cannot determine the answer")
_SPACED = ".()[],:;!*#{}"


def yes_or_no(reply: str) -> str | None:
    words = vqa_punctuation(reply.lower()).split()
    if ("yes" in words) != ("no" in words):
        return "yes" if "yes" in words else "no"
    return None


def infer_option(reply: str, choices: dict[str, str]) -> str | None:
    """``can_infer``: a letter of ``choices``, "Z" for a refusal, or None."""
    if _API_FAILURE in reply:
        return None
    if any(phrase in reply for phrase in _REFUSALS):
        return "Z"
    splits = re.sub("[" + re.escape(_SPACED) + "]", " ", reply).split()
    named = [letter for letter in choices if letter in splits]
    if len(named) == 1:
        return named[0]
    if not named and "Z" in splits:
        return "Z"
    lowered = reply.lower()
    texts = [letter for letter, text in choices.items() if str(text).lower() in lowered]
    return texts[0] if len(texts) == 1 else None


def read_as_vlmevalkit(probe, reply: str, cfg) -> Reading:
    options = [" ".join(vqa_words(option)) for option in probe.options] if probe.is_choice else None
    gold_text = " ".join(vqa_words(probe.gold_text))
    if gold_text in ("yes", "no") and (options is None or sorted(options) == ["no", "yes"]):
        answer = yes_or_no(reply)
        if answer is None:
            return no_answer("Unknown (YOrN_Extraction)")
        committed = LETTERS[options.index(answer)] if options else answer
        return judged(committed, answer == gold_text, f"YOrN_Extraction: {answer}")
    if probe.is_choice:
        labels = list(probe.shown_labels)
        label = infer_option(reply, dict(zip(labels, probe.options)))
        if label is None:
            return no_answer("can_infer found no option")
        if label == "Z":
            return no_answer("can_infer: Z (a refusal)")
        return judged_option(probe, labels.index(label), "can_infer")
    prediction = " ".join(vqa_words(reply))
    if not prediction:
        return no_answer("an empty reply")
    return judged(prediction[:80], prediction == gold_text, "process_answer equality")


JUDGE = JudgeDeclaration(kind=JudgeKind.vlmevalkit.value, schema=VlmevalkitJudgeConfig,
                         judge=per_reply(read_as_vlmevalkit))
