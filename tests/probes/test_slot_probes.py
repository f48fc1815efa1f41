"""Keywords and slot-guessing probes: whole words only, the same word masked in both arms, skips counted."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from medexp.benchmarks.base import Example
from medexp.config.ranges import ConfigRangeError, validate
from medexp.config.schemas import KeywordConfig
from medexp.probes.keywords import STOP_WORDS, KeywordSource, keyword_source, words
from medexp.probes.slots import (
    BACK_TRANSLATION,
    SLOT_MASK,
    SlotSettings,
    check_template,
    mask_word,
    shared_keywords,
    slot_probes,
)

IMAGE = Path("scan.png")


def example(index: int, question: str, answer: str = "liver", **meta) -> Example:
    return Example(f"demo::test::{index:04d}", index, IMAGE, question, answer, None, meta)


def test_words_are_whole_tokens_compared_by_case_folding():
    assert words("Is the X-Ray of the patient's LEFT lung T2-weighted? No, not.") == [
        "is", "the", "x-ray", "of", "the", "patient's", "left", "lung", "t2-weighted", "no", "not"]
    assert words("3 lesions, 2.5 cm") == ["lesions", "cm"]  # numbers alone are not words


def test_keywords_come_from_the_sources_minus_stop_words():
    source = KeywordSource(frozenset({"liver", "ct", "left", "the", "no"}))
    assert source.keywords("Is there a lesion in the LEFT liver lobe on CT? The liver, not the kidney.") == \
        ["left", "liver", "ct"]
    assert "left" not in STOP_WORDS and "the" in STOP_WORDS
    assert KeywordSource(frozenset({"ct", "mri"}), min_length=3).keywords("CT or MRI?") == ["mri"]


def test_a_tagger_adds_its_content_words():
    tags = {"Which": "DET", "organ": "NOUN", "looks": "VERB", "enlarged": "ADJ", "here": "ADV"}
    source = KeywordSource(frozenset({"liver"}), tagger=lambda text: [(w, tags.get(w, "X")) for w in text.split()],
                           pos=frozenset({"NOUN", "ADJ", "VERB"}))
    assert source.keywords("Which organ looks enlarged here liver") == ["organ", "looks", "enlarged", "liver"]


def test_keyword_source_from_config_reads_answers_meta_and_words():
    examples = [example(0, "q", "left kidney", organ="kidney", modality="CT"),
                example(1, "q", "no", organ="liver", modality=None)]
    cfg = OmegaConf.structured(KeywordConfig(answers=True, meta_fields=["modality"], words=["Nodule"],
                                             extra_stop_words=["left"]))
    source = keyword_source(cfg, examples)
    assert source.vocabulary == {"left", "kidney", "no", "ct", "nodule"}
    # "no" is a stop word
    assert source.keywords("CT of the left kidney shows a nodule; no") == ["ct", "kidney", "nodule"]
    with pytest.raises(ValueError, match=r"names 'site', which no example has; the examples' meta fields are "
                                         r"\['modality', 'organ'\]"):
        keyword_source(OmegaConf.structured(KeywordConfig(meta_fields=["site"])), examples)


def test_a_keyword_config_needs_a_source():
    with pytest.raises(ConfigRangeError, match="no keyword source is enabled"):
        validate(OmegaConf.structured(KeywordConfig(answers=False)), "detector.keywords")
    validate(OmegaConf.structured(KeywordConfig(answers=False, words=["liver"])), "detector.keywords")


def test_spacy_without_spacy_or_its_model_names_the_install_command():
    cfg = OmegaConf.structured(KeywordConfig(spacy_model="en_core_web_sm"))
    with pytest.raises((ImportError, OSError), match="spacy download en_core_web_sm"):
        keyword_source(cfg, [example(0, "q")])


def test_mask_word_masks_every_whole_word_occurrence():
    masked, surface, count = mask_word("No lesion. The Lesion is not a lesion-like spot; lesions too.", "lesion")
    assert masked == "No [MASK]. The [MASK] is not a lesion-like spot; lesions too."
    assert (surface, count) == ("lesion", 2)
    assert mask_word("no, not now", "no") == ("[MASK], not now", "no", 1)
    with pytest.raises(ValueError, match="does not occur"):
        mask_word("nothing here", "no")


def test_both_arms_mask_the_same_word_drawn_from_the_shared_keywords():
    source = KeywordSource(frozenset({"liver", "lesion", "ct", "left"}))
    original = "Is there a lesion in the left liver on this CT?"
    back = "On this CT scan, does the liver have a Lesion?"
    assert shared_keywords(original, back, source) == ["lesion", "liver", "ct"]  # "left" is lost in translation
    chosen = Counter()
    for seed in range(300):
        probes = slot_probes([example(0, original)], [original], [back], source, SlotSettings(seed)).probes
        first, second = probes
        assert (first.kind, second.kind) == (SLOT_MASK, BACK_TRANSLATION)
        word = first.meta["masked_word"]
        assert second.meta["masked_word"] == word and first.gold == second.gold
        assert word not in words(first.question) and word not in words(second.question)
        assert "[MASK]" in first.question and "[MASK]" in second.question
        assert first.image == second.image == IMAGE
        chosen[word] += 1
    assert set(chosen) == {"lesion", "liver", "ct"} and min(chosen.values()) > 60
    # the gold is the word as the original writes it
    probes = slot_probes([example(0, original)], [original], [back], KeywordSource(frozenset({"ct"})),
                         SlotSettings(0)).probes
    assert probes[0].gold == "CT"
    assert probes[0].question == 'In this text one word is replaced by [MASK]: "Is there a lesion in the left liver ' \
                                 'on this [MASK]?"\nWhich word is missing?'
    assert probes[1].question.startswith('In this text one word is replaced by [MASK]: "On this [MASK] scan')


def test_the_draw_is_reproducible_and_per_example():
    source = KeywordSource(frozenset({"liver", "lesion", "ct", "kidney", "mri"}))
    texts = ["lesion in the liver on CT", "kidney lesion on MRI", "liver and kidney on CT"]
    backs = ["CT shows a lesion of the liver", "MRI shows a kidney lesion", "CT of kidney and liver"]
    examples = [example(i, text) for i, text in enumerate(texts)]
    first = slot_probes(examples, texts, backs, source, SlotSettings(7)).probes
    again = slot_probes(examples, texts, backs, source, SlotSettings(7)).probes
    assert first == again
    alone = slot_probes(examples[2:], texts[2:], backs[2:], source, SlotSettings(7)).probes
    assert alone == first[4:]


def test_items_without_a_shared_keyword_or_with_an_unchanged_text_are_skipped_and_counted():
    source = KeywordSource(frozenset({"liver", "kidney"}))
    texts = ["Is the liver enlarged?", "Is the kidney normal?", "Any finding?", "Is the liver normal?"]
    backs = ["Is the hepatic organ big?", "is the KIDNEY normal", "Anything found?", "Does the liver look normal?"]
    examples = [example(i, text) for i, text in enumerate(texts)]
    result = slot_probes(examples, texts, backs, source, SlotSettings(0))
    assert [p.example_id for p in result.probes] == ["demo::test::0003"] * 2
    assert result.skip_counts() == {"no shared keyword": 2, "unchanged": 1}
    reasons = dict(result.skipped)
    assert "none of the keywords ['liver']" in reasons["demo::test::0000::slot_mask"]
    assert "the text has no keyword" in reasons["demo::test::0002::slot_mask"]


@pytest.mark.parametrize(("template", "mask", "message"), [
    ("Fill in: {txt}", "[MASK]", "must name {text}"),
    ("{text} {answer}", "[MASK]", "nothing else"),
    ("{text}", " ", "mask token is empty"),
    ("{text", "[MASK]", "literal brace"),
])
def test_bad_templates_are_refused(template, mask, message):
    with pytest.raises(ValueError, match=message):
        check_template(template, mask)
