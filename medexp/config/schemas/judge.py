"""Schemas of the judges (conf/judge/*.yaml, the cell's ``judge:``): how the stage between a model's
replies and an answering detector's statistics decides what each reply means (DESIGN.md, "Answers
and probes"). The reply stays as the model wrote it; the judge names the answer it commits to and
its verdict. One schema per kind of judge; the declarations live in :mod:`medexp.answers.judges`.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from enum import Enum
from typing import Optional

from omegaconf import MISSING

from medexp.config.ranges import at_least, fraction, share
from medexp.config.schemas.model import ModelConfig


class JudgeKind(str, Enum):
    read = "read"  # rules a careful reader applies: sentences, restated findings, refusals (the default)
    exact = "exact"  # the strict parser: a reply must be a letter or the whole answer
    llava_med = "llava_med"  # LLaVA-Med's run_eval.py: closed yes/no accuracy, open recall
    vlmevalkit = "vlmevalkit"  # VLMEvalKit's yes/no extraction and multiple-choice matching
    model = "model"  # a judge model behind an OpenAI-compatible endpoint


class FreeTextMetric(str, Enum):
    exact = "exact"  # whole-answer equality after normalisation (never substring containment)
    rouge_l = "rouge_l"  # ROUGE-L F1 (rouge-score) of the normalised texts >= rouge_threshold


@dataclass
class JudgeBase:
    name: str = MISSING  # the judge's name: tag medexp.judge, column `judge` of judged.parquet
    kind: JudgeKind = MISSING


@dataclass
class ReadJudgeConfig(JudgeBase):
    # A yes/no reply that restates the asked finding ("there is no evidence of an aortic aneurysm")
    # answers the question when it names at least this share of the finding's content words.
    finding_coverage: float = share(0.75)


@dataclass
class ExactJudgeConfig(JudgeBase):
    free_text_metric: FreeTextMetric = FreeTextMetric.exact
    rouge_threshold: float = share(0.5)  # rouge_l: a reply is correct when its F1 with the gold is at least this
    number_words_to_digits: bool = True  # free text: "two" and "2" normalise alike (zero to twenty)


@dataclass
class LlavaMedJudgeConfig(JudgeBase):
    # An open question's reply is counted correct when its recall of the gold's words (run_eval.py's
    # open "recall") reaches this; the recall itself is logged per reply.
    open_recall: float = share(1.0)
    # run_eval.py appends a closed hit only when it is 1: a reply naming yes or no that misses the
    # gold leaves its denominator. true reproduces that published figure (such replies are error
    # rows, out of every denominator); false counts them wrong.
    drop_closed_misses: bool = False


@dataclass
class VlmevalkitJudgeConfig(JudgeBase):
    pass


@dataclass
class ModelJudgeConfig(JudgeBase):
    # The judge model: an openai_compatible model config (conf/model/openai_compatible.yaml's
    # fields; set judge.model.base_url and judge.model.name on the command line).
    model: ModelConfig = MISSING
    system_prompt: Optional[str] = None
    # What the judge model is asked, per reply: {question}, {options} (one "<label>. <text>" line
    # per option, in the labels the probe showed, "(none: open question)" without options) and {reply}.
    prompt: str = (
        "A model was asked a question about a medical image and replied. Say which answer the reply "
        "commits to.\nQuestion: {question}\nOptions: {options}\nReply: {reply}\n"
        "Answer with the option's label as shown, or for an open question the answer in a few words, or NONE "
        "when the reply refuses, commits to several answers, answers another question or says nothing."
    )
    max_new_tokens: int = at_least(16, 1)
    # A cell judged by a model also reads every reply with judge=read and logs the share of
    # replies on which the two agree; below this it warns.
    min_agreement: float = fraction(0.8)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        fields = {name for _, name, _, _ in string.Formatter().parse(str(node.prompt)) if name is not None}
        if fields != {"question", "options", "reply"}:
            return (f"{path}.prompt must use exactly the fields {{question}}, {{options}} and {{reply}}; "
                    f"it uses {sorted(fields)}")
        return None


JUDGE_SCHEMAS = {
    JudgeKind.read.value: ReadJudgeConfig,
    JudgeKind.exact.value: ExactJudgeConfig,
    JudgeKind.llava_med.value: LlavaMedJudgeConfig,
    JudgeKind.vlmevalkit.value: VlmevalkitJudgeConfig,
    JudgeKind.model.value: ModelJudgeConfig,
}
