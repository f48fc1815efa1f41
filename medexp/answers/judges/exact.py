"""``judge=exact``: the strict parser (:mod:`medexp.answers.parse`). A multiple-choice reply must be
an option letter (``B``, ``(B)``, ``Answer: B``, ``B. <its text>``) or exactly one option's text; a
free-text reply must equal the gold after normalisation, or reach ``rouge_threshold`` in ROUGE-L F1
(``free_text_metric=rouge_l``). Any other reply is a no-answer: a sentence is never read."""

from __future__ import annotations

from medexp.answers.judges.base import JudgeDeclaration, Reading, judged, no_answer, per_reply
from medexp.answers.parse import exact_match, normalise_answer, parse_letter, rouge_l
from medexp.config.schemas.judge import ExactJudgeConfig, FreeTextMetric, JudgeKind
from medexp.probes.base import option_letters


def read_exactly(probe, reply: str, cfg) -> Reading:
    if probe.is_choice:
        letter = parse_letter(reply, option_letters(len(probe.options)), probe.options)
        if letter is None:
            return no_answer("no option letter (strict parser)")
        return judged(letter, letter == probe.gold, "option letter")
    digits = bool(cfg.number_words_to_digits)
    normalised = normalise_answer(reply, digits)
    if not normalised:
        return no_answer("empty reply")
    if FreeTextMetric(cfg.free_text_metric) is FreeTextMetric.rouge_l:
        score = rouge_l(reply, probe.gold, digits)
        right = score >= float(cfg.rouge_threshold)
        return judged(normalise_answer(probe.gold, digits) if right else normalised, right, f"ROUGE-L F1 {score:.2f}")
    right = exact_match(reply, probe.gold, digits)
    return judged(normalised, right, "equals the gold" if right else "differs from the gold")


JUDGE = JudgeDeclaration(kind=JudgeKind.exact.value, schema=ExactJudgeConfig, judge=per_reply(read_exactly))
