"""The harness judges reproduce their tools' published arithmetic, quirks included (LLaVA-Med's
run_eval.py, VLMEvalKit's YOrN_Extraction and can_infer), against values worked out by hand."""

from __future__ import annotations

import pytest

from medexp.answers.judges.base import Verdict
from medexp.answers.judges.llava_med import read_as_llava_med, recall
from medexp.answers.judges.vlmevalkit import infer_option, read_as_vlmevalkit, yes_or_no
from medexp.answers.judges.vqa_text import vqa_normalise, vqa_punctuation
from medexp.config.schemas.judge import LlavaMedJudgeConfig, VlmevalkitJudgeConfig
from tests.answers.test_judge_read import OPTIONS, asked

LLAVA = LlavaMedJudgeConfig(name="llava_med", kind="llava_med")
VLMEVALKIT = VlmevalkitJudgeConfig(name="vlmevalkit", kind="vlmevalkit")


def test_the_vqa_normalisation_keeps_its_quirks():
    assert vqa_punctuation("yes, it is.") == "yes it is"  # ", " touches a space: deleted
    assert vqa_punctuation("left-sided") == "left sided"  # "-" touches no space: a space
    assert vqa_punctuation("1,000 cells, left") == "1000 cells left"  # a comma between digits: every mark deleted
    assert vqa_punctuation("3.5 cm.") == "3.5 cm"  # a period before a digit stays
    assert vqa_normalise("The answer is two, not none.") == "answer is 2 not 0"
    assert vqa_normalise("it dont") == "it don't"


@pytest.mark.parametrize("gold, reply, verdict", [
    ("yes", "Yes, there is a mass.", "correct"),
    ("yes", "No, not yes.", "correct"),  # names yes and no and holds the gold: a hit for either gold
    ("no", "No, not yes.", "correct"),
    ("no", "I don't know.", "correct"),  # "know" holds "no"
    ("no", "Maybe.", "wrong"),  # neither yes nor no: a miss
    ("no", "Yes, it is there.", "wrong"),  # names yes without the gold: a miss (counted here)
])
def test_llava_meds_closed_hit_is_a_substring_test(gold, reply, verdict):
    assert read_as_llava_med(asked("Is there a mass?", gold), reply, LLAVA).verdict.value == verdict


def test_llava_meds_closed_misses_can_leave_the_denominator_as_run_eval_does():
    dropping = LlavaMedJudgeConfig(name="llava_med", kind="llava_med", drop_closed_misses=True)
    reading = read_as_llava_med(asked("Is there a mass?", "no"), "Yes, it is there.", dropping)
    assert reading.verdict is Verdict.error and "denominator" in reading.reason
    # a miss naming neither yes nor no stays in it, as run_eval.py appends that 0
    assert read_as_llava_med(asked("Is there a mass?", "no"), "Maybe.", dropping).verdict is Verdict.wrong


def test_llava_meds_open_recall_by_hand():
    # reply words: left 1, upper 1, lobe 1, of 1, lung 2; gold: left, lung. shared counts 1 + 2 = 3, missed 0.
    assert recall("left upper lobe of lung lung", "left lung") == 1.0
    # shared: lung 1; missed: left 1 -> 1 / 2
    assert recall("right lung", "left lung") == 0.5
    assert recall("", "left lung") == 0.0 and recall("spleen", "left lung") == 0.0
    reading = read_as_llava_med(asked("Where is the lesion?", "left lung"), "The right lung.", LLAVA)
    assert (reading.verdict, reading.score) == (Verdict.wrong, 0.5)
    half = LlavaMedJudgeConfig(name="llava_med", kind="llava_med", open_recall=0.5)
    assert read_as_llava_med(asked("Where is the lesion?", "left lung"), "The right lung.", half).verdict \
        is Verdict.correct


@pytest.mark.parametrize("reply, answer", [
    ("Yes.", "yes"), ("no", "no"), ("Yes, there is no fracture.", None), ("Nothing abnormal", None),
    ("The answer: NO!", "no"),
])
def test_vlmevalkits_yes_no_extraction(reply, answer):
    assert yes_or_no(reply) == answer


def test_vlmevalkits_choice_inference_letter_then_text():
    choices = dict(zip("ABCD", OPTIONS))
    assert infer_option("B", choices) == "B"
    assert infer_option("The answer is (C).", choices) == "C"
    assert infer_option("A mass is seen.", choices) == "A"  # the article counts as a letter, as in VLMEvalKit
    assert infer_option("A or B", choices) is None
    assert infer_option("It is a pneumothorax.", choices) == "B"  # by the option's text
    assert infer_option("I'm sorry, but without the image provided I can't say.", choices) == "Z"
    assert infer_option("Failed to obtain answer via API.", choices) is None


def test_vlmevalkit_judge_verdicts():
    choice = asked("What does the radiograph show?", "B", OPTIONS)
    assert read_as_vlmevalkit(choice, "It is a pneumothorax.", VLMEVALKIT).verdict is Verdict.correct
    assert read_as_vlmevalkit(choice, "Sorry, I can't help with images of people yet.", VLMEVALKIT).verdict \
        is Verdict.no_answer
    closed = asked("Is there a fracture?", "no")
    assert read_as_vlmevalkit(closed, "No, the ribs are intact.", VLMEVALKIT).verdict is Verdict.correct
    assert read_as_vlmevalkit(closed, "Yes, there is no fracture.", VLMEVALKIT).verdict is Verdict.no_answer
    opened = asked("What organ?", "the liver")
    assert read_as_vlmevalkit(opened, "Liver.", VLMEVALKIT).verdict is Verdict.correct
    assert read_as_vlmevalkit(opened, "The liver is shown.", VLMEVALKIT).verdict is Verdict.wrong
