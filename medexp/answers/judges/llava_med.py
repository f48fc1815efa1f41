"""``judge=llava_med``: LLaVA-Med's published metric (``llava/eval/run_eval.py`` of
microsoft/LLaVA-Med), so that numbers compare with its papers. Both texts are lower-cased and
VQA-normalised (:mod:`medexp.answers.judges.vqa_text`).

- A closed question (meta answer_type CLOSED, a yes/no gold, or a multiple-choice probe, whose gold
  is its option's text): a reply containing ``yes`` or ``no`` *anywhere* (as a substring: "not" and
  "know" count) is a hit when it contains the gold as a substring, so "no, not yes" hits either
  gold; a reply containing neither is a miss. ``run_eval.py`` appends a hit only when it is 1, so a
  reply naming yes or no that misses the gold leaves its denominator: ``drop_closed_misses=true``
  reproduces that (an ``error`` row of cause ``judge``); by default it is wrong.
- An open question: the recall of the gold's words in the reply (``calculate_f1score``: the
  reply's counts of the words both hold over those plus the gold's counts of the words the reply
  lacks); correct when it reaches ``open_recall``. The recall is the row's ``score``.

It reads nothing: it is the harness's arithmetic, for comparison, not for auditing (judge=read).
"""

from __future__ import annotations

from collections import Counter

from medexp.answers.judges.base import JudgeDeclaration, Reading, Verdict, judged, per_reply
from medexp.answers.judges.vqa_text import vqa_normalise
from medexp.config.schemas.judge import JudgeKind, LlavaMedJudgeConfig


def closed_question(probe) -> bool:
    from medexp.probes.choice import EXAMPLE_META

    answer_type = str(probe.meta.get(EXAMPLE_META, {}).get("answer_type", "")).strip().upper()
    return probe.is_choice or answer_type == "CLOSED" or vqa_normalise(probe.gold) in ("yes", "no")


def recall(prediction: str, reference: str) -> float:
    """``run_eval.py``'s open recall of ``reference``'s words in ``prediction`` (0 when either is empty)."""
    predicted, wanted = Counter(prediction.split()), Counter(reference.split())
    if not predicted or not wanted:
        return 0.0
    shared = sum(count for word, count in predicted.items() if word in wanted)
    missed = sum(count for word, count in wanted.items() if word not in predicted)
    return shared / (shared + missed) if shared else 0.0


def read_as_llava_med(probe, reply: str, cfg) -> Reading:
    prediction = vqa_normalise(reply.lower())
    gold = vqa_normalise(probe.gold_text.lower())
    shown = prediction[:80]
    if closed_question(probe):
        if "yes" not in prediction and "no" not in prediction:
            return Reading(shown or "(empty)", Verdict.wrong, "closed: neither yes nor no in the reply")
        if gold in prediction:
            return judged(probe.gold if probe.is_choice else gold, True, "closed: names yes/no and holds the gold")
        if cfg.drop_closed_misses:
            return Reading("", Verdict.error, "closed miss, left out of run_eval.py's denominator")
        return Reading(shown, Verdict.wrong, "closed: names yes/no without the gold")
    score = recall(prediction, gold)
    right = score >= float(cfg.open_recall)
    return Reading(gold if right else (shown or "(empty)"), Verdict.correct if right else Verdict.wrong,
                   f"open recall {score:.2f}", score)


JUDGE = JudgeDeclaration(kind=JudgeKind.llava_med.value, schema=LlavaMedJudgeConfig, judge=per_reply(read_as_llava_med))
