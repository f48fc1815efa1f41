"""``judge=model``: a judge model behind an OpenAI-compatible endpoint names the answer each reply
commits to (as VLMEvalKit and MMBench ask a model to extract a choice), through the same client as
black-box answering (:class:`medexp.answers.openai_client.ChatClient`: bounded concurrency,
retries, errors as rows). The judge is asked ``judge.prompt`` per reply, text only, greedy; its
short answer is then read by ``judge=read``'s rules against the probe ("B", "no", "MRI"; for a
probe that showed other labels, the options are listed under those and "2" is read as the reply
would be), and "NONE" is a no-answer. A request that fails is an ``error`` reading (never a verdict, never
kept); the stage keeps the others by (judge, probe, reply) and reports the agreement with
``judge=read`` on the same replies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from medexp.answers.judges.base import JudgeContext, JudgeDeclaration, Reading, Verdict, no_answer
from medexp.config.schemas.judge import JudgeKind, ModelJudgeConfig, ReadJudgeConfig

JUDGE_KIND = "judge"  # the kind of the probes put to the judge model
_NONE = re.compile(r"^\W*(?:none|no\s+answer|n/?a)\W*$", re.IGNORECASE)


def judge_prompt(probe, reply: str, cfg) -> str:
    """The judge model's question about ``reply``: the options under the labels the model was shown,
    so that the judge's short answer ("2") is read in those, as the reply is."""
    options = ("\n" + "\n".join(f"{label}. {text}" for label, text in zip(probe.shown_labels, probe.options))) \
        if probe.is_choice else "(none: open question)"
    return str(cfg.prompt).format(question=probe.question, options=options, reply=reply)


def judge_with_model(probes: Sequence, replies: Sequence[str], cfg, context: JudgeContext) -> list[Reading]:
    from medexp.answers.judges.read import read_reply
    from medexp.answers.openai_client import ChatClient
    from medexp.config.schemas.answers import AnswerConfig
    from medexp.probes.base import Probe

    asked = [Probe(probe_id=f"{probe.probe_id}::{JUDGE_KIND}", example_id=probe.probe_id, kind=JUDGE_KIND,
                   question=judge_prompt(probe, reply, cfg), gold=probe.gold_text)
             for probe, reply in zip(probes, replies)]
    settings = AnswerConfig(max_new_tokens=int(cfg.max_new_tokens), system_prompt=cfg.system_prompt,
                            free_text_template="{question}")
    table = ChatClient.from_model_config(cfg.model).answer_probes(asked, settings)
    reader = ReadJudgeConfig(name="read", kind="read")
    readings = []
    for probe, row in zip(probes, table.to_dict("records")):
        if row["status"] == "error":
            readings.append(Reading("", Verdict.error, f"judge model: {row['error_cause']}: {row['error']}"))
        elif _NONE.match(row["response"] or "") or not (row["response"] or "").strip():
            readings.append(no_answer(f"judge model: {(row['response'] or '').strip()[:40] or 'empty'}"))
        else:
            read = read_reply(probe, row["response"], reader)
            readings.append(Reading(read.committed, read.verdict, f"judge model: {row['response'].strip()[:40]!r}"))
    return readings


JUDGE = JudgeDeclaration(kind=JudgeKind.model.value, schema=ModelJudgeConfig, judge=judge_with_model, cached=True)
