"""A probe that shows other labels than A, B, C (renumbered_options: 1, 2, 3) is read in those by
every judge and answered in those by likelihood; the committed answer is the positional letter,
as the gold is; a letter it did not show is no answer."""

from __future__ import annotations

import pandas as pd
import pytest

from medexp.answers.judges.base import Verdict
from medexp.answers.judges.cache import reply_key
from medexp.answers.judges.exact import read_exactly
from medexp.answers.judges.model import judge_prompt
from medexp.answers.judges.read import read_reply
from medexp.answers.judges.vlmevalkit import read_as_vlmevalkit
from medexp.answers.parse import parse_choice
from medexp.answers.whitebox import likelihood_answers
from medexp.config.schemas import AnswerConfig
from medexp.config.schemas.judge import ExactJudgeConfig, ModelJudgeConfig, VlmevalkitJudgeConfig
from medexp.probes.base import Probe
from tests.answers.judging import READ

OPTIONS = ("Kidney", "Liver", "Spleen", "Lung")
NUMBERS = ("1", "2", "3", "4")
EXACT = ExactJudgeConfig(name="exact", kind="exact")
VLMEVALKIT = VlmevalkitJudgeConfig(name="vlmevalkit", kind="vlmevalkit")


def labelled(labels=NUMBERS, gold: str = "B", variant: int = 0, **extra) -> Probe:
    return Probe(f"ex::renumbered::{variant}", "ex", "renumbered", "Which organ is enlarged?", gold,
                 options=OPTIONS, labels=labels, **extra)


# (reply, the option's position or None): the second option is Liver, labelled 2
NUMBERED = [
    ("2", 1), ("(2)", 1), ("2.", 1), ("[2]", 1), ("2)", 1), ("Option 2", 1), ("The answer is 2", 1),
    ("The answer is 2 because the organ is enlarged", 1), ("Answer: 2", 1), ("2. Liver", 1), ("2 Liver", 1),
    ("Liver", 1), ("liver.", 1), ("**2**", 1), ("2\nThe liver is enlarged.", 1), ("4", 3),
    ("B", None), ("(B)", None), ("The answer is B", None), ("B. Liver", None),
    ("2 or 3", None), ("2, 3", None), ("2 and 3", None), ("2. Not 3.", None), ("2. Kidney", None),
    ("12", None), ("5", None), ("2.5 cm lesion", None), ("2 masses are seen", None), ("", None),
]


@pytest.mark.parametrize(("reply", "position"), NUMBERED)
def test_the_strict_parser_reads_the_labels_the_probe_shows(reply, position):
    assert parse_choice(reply, NUMBERS, OPTIONS) == position


@pytest.mark.parametrize(("labels", "reply", "position"), [
    (("i", "ii", "iii", "iv"), "ii", 1), (("i", "ii", "iii", "iv"), "(iii)", 2), (("i", "ii", "iii", "iv"), "II.", 1),
    (("i", "ii", "iii", "iv"), "The answer is iv", 3), (("i", "ii", "iii", "iv"), "ii or iii", None),
    (("i", "ii", "iii", "iv"), "B", None), (("i", "ii", "iii", "iv"), "i think it is the liver", None),
    (("a", "b", "c", "d"), "b", 1), (("a", "b", "c", "d"), "(B)", 1), (("a", "b", "c", "d"), "The answer is b", 1),
    (("a", "b", "c", "d"), "a mass is seen", None), (("a", "b", "c", "d"), "b or c", None),
    (tuple(str(n) for n in range(1, 13))[:4], "1", 0),
])
def test_roman_and_lower_case_labels_are_read_case_insensitively(labels, reply, position):
    assert parse_choice(reply, labels, OPTIONS) == position


def test_ten_is_never_read_as_one_and_labels_must_differ_beyond_case():
    labels = tuple(str(n) for n in range(1, 12))
    options = tuple(f"option {n}" for n in range(11))
    assert parse_choice("10", labels, options) == 9 and parse_choice("(11)", labels, options) == 10
    assert parse_choice("1", labels, options) == 0
    with pytest.raises(ValueError, match="case-insensitively"):
        parse_choice("a", ("a", "A"), ("x", "y"))


@pytest.mark.parametrize(("reply", "position"), NUMBERED)
def test_judges_commit_the_positional_letter(reply, position):
    """judge=exact is the strict parser; judge=read reads alike every reply the parser accepts."""
    readings = [read_exactly(labelled(), reply, EXACT)]
    if position is not None:
        readings.append(read_reply(labelled(), reply, READ))
    for reading in readings:
        if position is None:
            assert reading.verdict is Verdict.no_answer, (reply, reading)
        else:
            assert reading.committed == "ABCD"[position] and reading.verdict is \
                (Verdict.correct if position == 1 else Verdict.wrong), (reply, reading)


@pytest.mark.parametrize(("reply", "committed"), [
    ("I would choose 2.", "B"), ("The correct option is (3), the spleen.", "C"), ("It is the liver.", "B"),
    ("ASSISTANT: 4", "D"),
])
def test_the_read_judge_reads_named_labels_and_option_texts(reply, committed):
    reading = read_reply(labelled(), reply, READ)
    assert reading.committed == committed, reading.reason


@pytest.mark.parametrize("reply", ["B", "(B)", "The answer is B.", "I would choose B.", "2 or 3", "2, 3",
                                   "Either 2 or 3.", "12", ""])
def test_a_remembered_letter_or_two_labels_is_no_answer_for_the_read_judge(reply):
    assert read_reply(labelled(), reply, READ).verdict is Verdict.no_answer


def test_the_read_judge_reads_the_option_text_a_wrong_label_comes_with_as_it_does_for_letters():
    assert read_reply(labelled(), "B. Liver", READ).committed == "B"  # the letter is no label; the text names Liver
    assert read_reply(labelled(), "2. Kidney", READ).committed == "A"


def test_a_refusal_reads_as_the_positional_refusal_option():
    probe = Probe("ex::renumbered::0", "ex", "renumbered", "q", "B", options=(*OPTIONS, "I don't know"),
                  labels=("1", "2", "3", "4", "5"), refusal="E")
    assert read_reply(probe, "5", READ).committed == "E"
    assert read_reply(probe, "I cannot tell without seeing the image.", READ).committed == "E"


def test_vlmevalkit_can_infer_with_the_shown_labels():
    assert read_as_vlmevalkit(labelled(), "The answer is 2.", VLMEVALKIT).committed == "B"
    assert read_as_vlmevalkit(labelled(), "3", VLMEVALKIT).verdict is Verdict.wrong
    assert read_as_vlmevalkit(labelled(), "B", VLMEVALKIT).verdict is Verdict.no_answer  # no label named
    assert read_as_vlmevalkit(labelled(), "It is the liver.", VLMEVALKIT).committed == "B"  # by the option's text
    assert read_as_vlmevalkit(labelled(), "2 or 3", VLMEVALKIT).verdict is Verdict.no_answer


def test_the_judge_model_sees_the_labels_and_its_answer_is_read_in_them():
    cfg = ModelJudgeConfig(name="model", kind="model")
    prompt = judge_prompt(labelled(), "It must be the second one.", cfg)
    assert "\n1. Kidney\n2. Liver\n3. Spleen\n4. Lung\n" in prompt and "A. Kidney" not in prompt
    assert read_reply(labelled(), "2", READ).committed == "B"  # the judge model's short answer, as judge=model reads it


def test_verdicts_are_kept_apart_per_label_set():
    numbered, roman = labelled(), labelled(("i", "ii", "iii", "iv"))
    lettered = Probe("ex::renumbered::0", "ex", "renumbered", "Which organ is enlarged?", "B", options=OPTIONS)
    assert len({reply_key(probe, "2") for probe in (numbered, roman, lettered)}) == 3


class LabelScorer:
    """Scores each answer text by a fixed table (the label the model prefers) and keeps what it was asked."""

    def __init__(self, scores: dict[str, float]):
        self.scores, self.asked = scores, []

    def score_examples(self, examples):
        self.asked += examples
        return pd.DataFrame([{"example_id": example.example_id, "position": example.position,
                              "sum_logprob": self.scores.get(example.answer, -50.0),
                              "mean_logprob": self.scores.get(example.answer, -50.0)}
                             for example in examples])


def test_likelihood_answering_scores_the_shown_labels_and_chooses_positionally():
    scorer = LabelScorer({"3": -1.0, "2": -2.0, "C": -9.0})
    table = likelihood_answers(scorer, [labelled()], AnswerConfig(mode="likelihood"))
    assert [example.answer for example in scorer.asked] == list(NUMBERS)
    assert "3. Spleen" in scorer.asked[0].question
    row = table.iloc[0]
    assert (row["response"], row["choice"], row["option_logliks"]) == ("3", "C", [-50.0, -2.0, -1.0, -50.0])
