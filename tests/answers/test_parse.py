"""The strict letter parser, free-text normalisation and matching (judge=exact reads with them)."""

from __future__ import annotations

import pytest

from medexp.answers.parse import exact_match, normalise_answer, parse_letter, rouge_l

OPTIONS = ("Pneumonia", "Pleural effusion", "Hepatitis C", "I don't know")

ACCEPTED = [
    ("B", "B"),
    ("b", "B"),
    ("(B)", "B"),
    ("[B]", "B"),
    ("( b )", "B"),
    ("B.", "B"),
    ("B)", "B"),
    ("B:", "B"),
    ("B: fluid in the pleural space", "B"),
    ("  B  \n", "B"),
    ("Answer: B", "B"),
    ("answer: b", "B"),
    ("ANSWER - B", "B"),
    ("The answer is B.", "B"),
    ("The answer is: (B)", "B"),
    ("The correct answer is B because fluid layers at the base", "B"),
    ("Final answer: (C)", "C"),
    ("The correct option is D.", "D"),
    ("Option B", "B"),
    ("**B**", "B"),
    ("**B.** Pleural effusion", "B"),
    ("`B`", "B"),
    ('"B"', "B"),
    ("B. Pleural effusion", "B"),
    ("B) Pleural effusion", "B"),
    ("(B) Pleural effusion", "B"),
    ("B Pleural effusion", "B"),  # a bare letter and its own option's text
    ("B. pleural effusion.", "B"),
    ("B. Pleural", "B"),  # cut short by max_new_tokens
    ("B\nThe costophrenic angle is blunted.", "B"),
    ("pleural effusion", "B"),  # exactly one option's text
    ("Pleural effusion.", "B"),
    ("The answer is pleural effusion", "B"),
    ("I don't know", "D"),  # the refusal option's text
    ("C. Hepatitis C", "C"),  # a letter inside its own option text is no second answer
    ("a", "A"),
    ("a.", "A"),
    ("(a)", "A"),
    ("B. A large effusion is seen.", "B"),  # "A" followed by a word is the article
    ("B, since the angle is blunted", "B"),
]

REJECTED = [
    ("", "empty"),
    ("   ", "blank"),
    ("A or B", "two letters"),
    ("A, B", "two letters"),
    ("A/B", "two letters"),
    ("(b) or (c)", "two letters"),
    ("b or c", "two letters"),
    ("A and B", "two letters"),
    ("B. Not A.", "names A as well"),
    ("Answer: B. Final answer: C", "two answers"),
    ("B (or maybe C)", "names C as well"),
    ("B. Pneumonia", "another option's text after the letter"),
    ("Based on the image", "a letter inside a word"),
    ("Bilateral infiltrates", "a letter inside a word"),
    ("no letter here", "no letter"),
    ("A mass is seen in the left lung", "the article, not an option"),
    ("The answer is a mass", "the article after a prefix"),
    ("B Pneumonia", "a bare letter followed by another option's text"),
    ("B is right", "a bare letter followed by words"),
    ("Option B is wrong", "negated"),
    ("E", "not one of the probe's letters"),
    ("Answer: F", "not one of the probe's letters"),
    ("e.g. fluid", "an abbreviation"),
    ("A's border", "a possessive"),
    ("I think it is B", "a prefix other than an answer prefix"),
    ("Pleural", "part of an option's text is not the option"),
]


@pytest.mark.parametrize(("reply", "letter"), ACCEPTED)
def test_accepted_replies(reply, letter):
    assert parse_letter(reply, "ABCD", OPTIONS) == letter


@pytest.mark.parametrize(("reply", "why"), REJECTED)
def test_rejected_replies(reply, why):
    assert parse_letter(reply, "ABCD", OPTIONS) is None, why


def test_without_option_texts_letters_still_parse():
    assert parse_letter("B: text", "ABCD") == "B"
    assert parse_letter("B. A large effusion", "ABCD") == "B"
    assert parse_letter("pleural effusion", "ABCD") is None
    assert parse_letter("B Pleural effusion", "ABCD") is None  # no option text to confirm it
    assert parse_letter(None, "ABCD") is None


def test_two_options_with_the_same_text_give_no_letter_by_text():
    assert parse_letter("normal", "AB", ("Normal", "normal.")) is None


def test_option_count_must_match_the_letters():
    with pytest.raises(ValueError, match="3 option texts for the letters 'AB'"):
        parse_letter("A", "AB", ("x", "y", "z"))


@pytest.mark.parametrize(("text", "normalised"), [
    ("Yes.", "yes"),
    ("  The LEFT  lung ", "left lung"),
    ("an X-ray", "x ray"),
    ("3.5 cm", "3 5 cm"),
    ("35 cm", "35 cm"),
    ("Two lesions", "2 lesions"),
    ("twenty-one", "20 1"),  # only whole words zero..twenty are mapped
    ("ＡＢＣ", "abc"),  # NFKC folds full-width letters
    ("50%", "50%"),  # symbols are kept
    ("¿Qué?", "qué"),
])
def test_normalise_answer(text, normalised):
    assert normalise_answer(text) == normalised


def test_number_words_can_stay_words():
    assert normalise_answer("two", number_words_to_digits=False) == "two"
    assert not exact_match("two", "2", number_words_to_digits=False)
    assert exact_match("two", "2")


@pytest.mark.parametrize(("reply", "gold", "match"), [
    ("no", "no", True),
    ("No.", "no", True),
    ("not", "no", False),  # never substring containment
    ("no, there is a lesion", "no", False),  # the whole answer must be the gold
    ("Yes", "no", False),
    ("the liver", "Liver", True),
    ("", "liver", False),
    ("...", "liver", False),
    ("left lung", "left lower lung", False),
])
def test_exact_match_is_whole_answer_equality(reply, gold, match):
    assert exact_match(reply, gold) is match


def test_rouge_l_f1_against_hand_computed_values():
    # "left lung" vs "left lower lung": LCS 2, precision 2/2, recall 2/3 -> F1 = 0.8
    assert rouge_l("left lung", "the left lower lung") == pytest.approx(0.8)
    # "no there is no lesion" vs "no": LCS 1, precision 1/5, recall 1 -> F1 = 1/3
    assert rouge_l("No, there is no lesion.", "no") == pytest.approx(1 / 3)
    assert rouge_l("liver", "liver") == 1.0 and rouge_l("spleen", "liver") == 0.0
    assert rouge_l("", "liver") == 0.0
    assert rouge_l("肺 炎", "肺 炎") == 1.0  # words outside [a-z0-9] are kept, unlike rouge-score's default tokenizer
