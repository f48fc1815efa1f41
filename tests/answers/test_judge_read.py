"""judge=read on replies written the way real models write them (issue 55): sentences, dialogue
turns, restated findings, option texts, refusals, rambling and noise, each with the verdict a reader
gives. The replies are this project's own, in the shapes of published answer files (LLaVA-Med's
VQA-RAD answer files: a leading "Human:" turn, a finding restated as absent, the option list echoed
back, a refusal to look at the image, another question answered)."""

from __future__ import annotations

import pytest

from medexp.answers.judges.base import Verdict
from medexp.answers.judges.read import alternatives, question_finding, read_reply
from medexp.answers.parse import parse_letter
from medexp.config.schemas.judge import ReadJudgeConfig
from medexp.probes import Probe
from medexp.probes.choice import EXAMPLE_META

READ = ReadJudgeConfig(name="read", kind="read")
OPTIONS = ("Pleural effusion", "Pneumothorax", "Atelectasis", "Cardiomegaly")


def asked(question: str, gold: str, options=None, refusal=None, answer_type=None) -> Probe:
    meta = {EXAMPLE_META: {"answer_type": answer_type}} if answer_type else {}
    return Probe("vqa::q1::original", "vqa::q1", "original", question, gold, options=options, refusal=refusal,
                 meta=meta)


YES_NO = [
    # (question, gold, reply, verdict, committed)
    ("Is there a focal mass in the liver?", "no", "No, there isn't a focal mass present in the image.", "correct", "no"),
    ("Is there a focal mass in the liver?", "no", "Yes.", "wrong", "yes"),
    ("Is there a focal mass in the liver?", "no", "yes", "wrong", "yes"),
    ("Is there airspace disease in the right lung?", "yes",
     "Human: Yes, airspace disease is seen in the right lower lung.", "correct", "yes"),
    ("Is the spleen enlarged?", "yes", "ASSISTANT: Yes, the spleen appears enlarged.", "correct", "yes"),
    ("Is the spleen enlarged?", "yes", "USER: <image>\nIs the spleen enlarged? ASSISTANT: No.", "wrong", "no"),
    ("Is the spleen enlarged?", "yes", "Based on the CT scan, yes.", "correct", "yes"),
    ("Is the spleen enlarged?", "yes", "**Answer:** Yes", "correct", "yes"),
    ("Is the spleen enlarged?", "yes", "I think yes, the spleen is larger than expected.", "correct", "yes"),
    # the finding restated, present or absent, with negation scope
    ("Is there evidence of a thoracic aortic dissection?", "yes",
     "Human: On this chest radiograph there is no evidence of a thoracic aortic dissection.", "wrong", "no"),
    ("Is there pleural effusion?", "no", "Pleural effusion is not seen.", "correct", "no"),
    ("Are there calcified gallstones?", "yes", "Calcified gallstones are present in the gallbladder.", "correct",
     "yes"),
    ("Are there calcified gallstones?", "yes",
     "Human: calcified gallstones are not present. Please choose from the following two options: [yes, no]",
     "wrong", "no"),
    ("Is the heart size normal?", "no", "The heart size appears abnormal, with an enlarged silhouette.", "correct",
     "no"),
    ("Is the heart size normal?", "no", "The heart size looks normal without any effusion.", "wrong", "yes"),
    ("Is there a left apical pneumothorax?", "no", "Human: No left apical pneumothorax", "correct", "no"),
    ("Is there calcification?", "no", "There is a large mass but no calcification.", "correct", "no"),
    ("Is there a mass?", "yes", "There is a large mass but no calcification.", "correct", "yes"),
    ("Is there a pneumothorax in the left lung?", "no",
     "There is no pneumothorax; the left lung is otherwise clear.", "correct", "no"),
    ("does this film show adequate inspiratory effort?", "yes",
     "The film shows adequate inspiratory effort with ten posterior ribs visible.", "correct", "yes"),
    ("Is the liver normal?", "yes", "The liver appears to be normal in this image.", "correct", "yes"),
    ("Is the liver normal?", "yes", "The liver is abnormal.", "wrong", "no"),
]

NO_ANSWERS = [
    # (question, gold, reply, what the reason says)
    ("Is this a sagittal plane?", "yes",
     "I'm sorry, I cannot see the image, so I cannot determine whether it is a sagittal plane.", "refusal"),
    ("Is this a sagittal plane?", "yes", "As an AI language model I am unable to interpret medical images.", "refusal"),
    ("Is the heart enlarged?", "no", "Yes and no.", "both yes and no"),
    ("Is there a pneumothorax?", "no", "There might be a small pneumothorax at the apex.", "hedges"),
    ("Is there a rib fracture?", "no", "Human: A frontal chest radiograph of an adult is displayed.",
     "does not answer the question asked"),
    ("Is there a rib fracture?", "no", "Human: Is there any consolidation in the lung fields?", "asks a question"),
    ("Is there a rib fracture?", "no", "Human: how would you tell the two options apart?", "asks a question"),
    ("Is there a rib fracture?", "no", "2019-07-14", "a date"),
    ("Is there a rib fracture?", "no", "312.4 KB", "a file size"),
    ("Is there a rib fracture?", "no", "Copyright (c) 2017 Radiology Teaching Files. All rights reserved.",
     "a copyright line"),
    ("Is there a rib fracture?", "no", "There is a rib fracture. No rib fracture is identified.",
     "both present and absent"),
    ("Is there a rib fracture?", "no", "Is there a rib fracture?", "repeats its prompt"),
    ("Is there a rib fracture?", "no", "   ", "empty"),
]


@pytest.mark.parametrize("question, gold, reply, verdict, committed", YES_NO)
def test_a_yes_no_reply_is_read_for_what_it_commits_to(question, gold, reply, verdict, committed):
    reading = read_reply(asked(question, gold), reply, READ)
    assert (reading.verdict.value, reading.committed) == (verdict, committed), reading.reason


@pytest.mark.parametrize("question, gold, reply, why", NO_ANSWERS)
def test_a_reply_committing_to_nothing_is_a_no_answer_with_its_reason(question, gold, reply, why):
    reading = read_reply(asked(question, gold), reply, READ)
    assert reading.verdict is Verdict.no_answer and reading.committed == ""
    assert why in reading.reason


def test_the_asked_finding_is_the_questions_content_words():
    assert question_finding("Is there evidence of an aortic aneurysm?") == ["aortic", "aneurysm"]
    assert question_finding("Are there any fractures of the ribs in this image?") == ["fracture", "rib"]
    assert question_finding("Is the cardiac silhouette enlarged?") == ["cardiac", "silhouette", "enlarged"]


def test_a_restatement_naming_too_little_of_the_finding_commits_to_nothing():
    """Two of three content words named (0.67) is below the default 0.75: "inspiratory effort"
    alone does not say whether the effort was adequate; a lower coverage reads it as present."""
    probe = asked("does this represent adequate inspiratory effort?", "yes")
    reply = "Human: ok, we will go with that. I understand that this is about inspiratory effort."
    assert read_reply(probe, reply, READ).verdict is Verdict.no_answer
    lenient = ReadJudgeConfig(name="read", kind="read", finding_coverage=0.6)
    assert read_reply(probe, reply, lenient).committed == "yes"


def test_a_closed_question_marked_closed_is_read_as_yes_no_whatever_its_wording():
    probe = asked("Abnormal findings on the left?", "yes", answer_type="CLOSED")
    assert read_reply(probe, "Yes, there are abnormal findings on the left.", READ).verdict is Verdict.correct
    # without the mark and without an auxiliary verb, the same text is an open question: the gold's word
    open_probe = asked("Abnormal findings on the left?", "yes")
    assert read_reply(open_probe, "abnormal findings", READ).verdict is Verdict.wrong


EITHER_OR = [
    ("Is this a CT or MRI?", "MRI", "This is a magnetic resonance image of the brain.", "correct", "mri"),
    ("Is this a CT or MRI?", "MRI", "It is an MRI, not a CT.", "correct", "mri"),
    ("Is this a CT or MRI?", "CT", "The study is a non-contrast computed tomography of the head.", "correct", "ct"),
    ("Is this a CT or MRI?", "MRI", "This is an axial CT slice.", "wrong", "ct"),
    ("Is the lesion bilateral or unilateral?", "bilateral", "The opacities are bilateral.", "correct", "bilateral"),
    ("Is the mass in the left lobe or the right lobe?", "right lobe", "It sits in the right lobe of the liver.",
     "correct", "right lobe"),
    ("Is this a T1 or T2 weighted image?", "T2", "T2-weighted MR image.", "correct", "t2"),
    ("Is this an x-ray, CT, or ultrasound?", "ultrasound", "This is a sonogram of the kidney.", "correct",
     "ultrasound"),
]


@pytest.mark.parametrize("question, gold, reply, verdict, committed", EITHER_OR)
def test_an_either_or_question_is_answered_by_the_one_alternative_named(question, gold, reply, verdict, committed):
    reading = read_reply(asked(question, gold, answer_type="CLOSED"), reply, READ)
    assert (reading.verdict.value, reading.committed) == (verdict, committed), reading.reason


def test_an_either_or_reply_naming_both_or_neither_is_a_no_answer():
    probe = asked("Is this a CT or MRI?", "MRI", answer_type="CLOSED")
    assert "names several answers" in read_reply(probe, "Both CT and MRI images are shown.", READ).reason
    assert read_reply(probe, "Yes.", READ).verdict is Verdict.no_answer
    assert alternatives("Is this a CT or MRI?", "MRI") == [["ct"], ["mri"]]
    assert alternatives("Is the mass solid or cystic?", "hypodense") is None  # the gold is neither: an open question


OPEN = [
    ("Which side is the lesion on?", "left", "The lesion is on the L side.", "correct"),
    ("Which side is the lesion on?", "left", "The lesion is in the right hemisphere.", "wrong"),
    ("What is abnormal?", "pleural effusions", "There is a small right pleural effusion.", "correct"),
    ("What is abnormal?", "oedema", "Pulmonary edema.", "correct"),
    ("What imaging modality?", "CT", "This image was acquired with computed tomography.", "correct"),
    ("What imaging modality?", "MRI", "MR", "correct"),
    ("How many kidneys are seen?", "2", "Two kidneys are seen.", "correct"),
    ("How large is the nodule?", "5 mm", "The nodule measures approximately 5mm.", "correct"),
    ("How large is the nodule?", "5 mm", "The nodule measures 8 mm.", "wrong"),
    ("What is the finding?", "no", "normal", "wrong"),  # never a substring: "no" is not in "normal"
    ("What is the finding?", "pneumothorax", "No pneumothorax is seen; the finding is consolidation.", "wrong"),
]


@pytest.mark.parametrize("question, gold, reply, verdict", OPEN)
def test_an_open_reply_is_correct_when_it_states_the_golds_words(question, gold, reply, verdict):
    assert read_reply(asked(question, gold), reply, READ).verdict.value == verdict


@pytest.mark.parametrize("reply, why", [
    ("left and right", "names both left and right"),
    ("The nodule is 5 or 6 mm.", "names several numbers"),
    ("I'm sorry, I can't determine that from the image.", "refusal"),
    ("Jan 3, 2020", "a date"),
    # timestamps as LLaVA-Med's 1-epoch checkpoint printed them on VQA-RAD's open questions
    ("2017-01-16 11:20:23 UTC", "a date"),
    ("2020-02-22 18:36:57 UTC+1", "a date"),
    ("Nope!", "answers yes or no to an open question"),
    ("What is the finding?", "repeats its prompt"),
])
def test_an_open_reply_committing_to_nothing_is_a_no_answer(reply, why):
    gold = "5 mm" if "mm" in reply else "left"
    reading = read_reply(asked("What is the finding?", gold), reply, READ)
    assert reading.verdict is Verdict.no_answer and why in reading.reason


CHOICE = [
    # (reply, verdict, committed)  gold B = Pneumothorax
    ("B", "correct", "B"),
    ("(b)", "correct", "B"),
    ("The answer is (B).", "correct", "B"),
    ("**Answer: B**", "correct", "B"),
    ("I would choose B because the lung edge is visible.", "correct", "B"),
    ("C", "wrong", "C"),
    ("There is a pneumothorax on the right side.", "correct", "B"),
    ("Human: The image shows atelectasis of the left lower lobe.", "wrong", "C"),
    ("It is not a pleural effusion; it is a pneumothorax.", "correct", "B"),
    ("Options:\nA. Pleural effusion\nB. Pneumothorax\nC. Atelectasis\nD. Cardiomegaly\nAnswer: D", "wrong", "D"),
]


@pytest.mark.parametrize("reply, verdict, committed", CHOICE)
def test_a_choice_is_read_by_its_letter_or_its_options_text(reply, verdict, committed):
    reading = read_reply(asked("What does the radiograph show?", "B", OPTIONS), reply, READ)
    assert (reading.verdict.value, reading.committed) == (verdict, committed), reading.reason


@pytest.mark.parametrize("reply, why", [
    ("A or B", "several options"),
    ("Both a pleural effusion and a pneumothorax are present.", "several answers"),
    ("A mass is seen in the right upper lobe.", "does not answer"),  # "A" is the article here
    ("I am not able to view images.", "refusal"),
])
def test_a_choice_reply_naming_no_option_or_several_is_a_no_answer(reply, why):
    reading = read_reply(asked("What does the radiograph show?", "B", OPTIONS), reply, READ)
    assert reading.verdict is Verdict.no_answer and why in reading.reason


def test_a_refusal_is_the_refusal_option_where_the_probe_offers_one():
    probe = asked("What does the radiograph show?", "B", (*OPTIONS, "I don't know"), refusal="E")
    reading = read_reply(probe, "I cannot tell without seeing the image.", READ)
    assert (reading.verdict, reading.committed) == (Verdict.wrong, "E")


def test_yes_no_options_are_read_as_yes_no():
    probe = asked("Is there a mass?", "A", ("Yes", "No"))
    assert read_reply(probe, "Human: Yes, a mass is present.", READ).committed == "A"
    assert read_reply(probe, "There is no mass in this image.", READ).committed == "B"


def test_every_reply_the_strict_parser_accepts_read_the_same():
    """judge=read extends the strict parser; it never reads a letter it accepts otherwise."""
    from tests.answers.test_parse import ACCEPTED

    letters = "ABCD"
    probe = asked("What does the radiograph show?", "B", ("Pneumonia", "Pleural effusion", "Hepatitis C",
                                                         "I don't know"))
    for reply, letter in ACCEPTED:
        assert parse_letter(reply, letters, probe.options) == letter
        assert read_reply(probe, reply, READ).committed == letter, reply
