"""``judge=exact``: the strict parser (:mod:`medexp.answers.parse`). A multiple-choice reply must be
an option letter (``B``, ``(B)``, ``Answer: B``, ``B. <its text>``; for a probe showing other labels,
one of those: ``2``, ``(2)``, ``Option 2``) or exactly one option's text, committed as the option's
positional letter; a free-text reply must equal the gold after normalisation, or reach
``rouge_threshold`` in ROUGE-L F1 (``free_text_metric=rouge_l``). Any other reply is a no-answer:
a sentence is never read."""

from __future__ import annotations

from medexp.answers.judges.base import JudgeDeclaration, Reading, judged, judged_option, no_answer, per_reply
from medexp.answers.parse import exact_match, normalise_answer, parse_choice, rouge_l
from medexp.config.schemas.judge import ExactJudgeConfig, FreeTextMetric, JudgeKind


def read_exactly(probe, reply: str, cfg) -> Reading:
    if probe.is_choice:
        position = parse_choice(reply, probe.shown_labels, probe.options)
        shown = "letter" if probe.labels is None else "label"
        if position is None:
            return no_answer(f"no option {shown} (strict parser)")
        return judged_option(probe, position, f"option {shown}")
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
