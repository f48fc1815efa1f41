"""DIS-CO's source question: one probe per distinct image of the audited and control examples, the
gold the true collection's letter, overlaps refused, images lacking skipped; the schema's checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from medexp.benchmarks.base import Example
from medexp.config import compose
from medexp.config.ranges import ConfigRangeError, validate
from medexp.config.wording import DEFAULT_SOURCE_QUESTION, DEMO_SOURCES
from medexp.probes.choice import EXAMPLE_META
from medexp.probes.source import SOURCE_AUDITED, SOURCE_CONTROL, source_probes

COLLECTIONS = ("SLAKE", "PathVQA", "VQA-RAD", "None of these")


def example(split: str, index: int, image: str | None, modality: str = "CT") -> Example:
    return Example(f"bench::{split}::{index}", index, Path(image) if image else None, f"Question {index}?", "yes",
                   None, {"modality": modality, "boxes": [[0, 0, 1, 1]]})


def probes(audited, control, audited_option="SLAKE", control_option="None of these"):
    return source_probes(audited, control, DEFAULT_SOURCE_QUESTION, COLLECTIONS, audited_option, control_option)


def test_one_probe_per_distinct_image_with_the_true_collection_as_gold():
    audited = [example("test", 0, "a.png"), example("test", 1, "a.png", "MRI"), example("test", 2, "b.png", "MRI")]
    control = [example("heldout", 0, "c.png"), example("heldout", 1, "c.png")]
    made = probes(audited, control)
    assert [probe.probe_id for probe in made.probes] == [
        "bench::test::0::source_audited", "bench::test::2::source_audited", "bench::heldout::0::source_control"]
    assert [probe.kind for probe in made.probes] == [SOURCE_AUDITED, SOURCE_AUDITED, SOURCE_CONTROL]
    # SLAKE is A, "None of these" D; every image sees the same question and collections in one order
    assert [probe.gold for probe in made.probes] == ["A", "A", "D"]
    assert {probe.options for probe in made.probes} == {COLLECTIONS}
    assert {probe.question for probe in made.probes} == {DEFAULT_SOURCE_QUESTION}
    assert all(probe.meta["audited_letter"] == "A" and probe.meta["n_options"] == 4 for probe in made.probes)
    # the shared image keeps its first example's meta (its stratum); only scalar meta travels
    assert made.probes[0].meta[EXAMPLE_META] == {"modality": "CT"}
    assert made.probes[0].gold_text == "SLAKE" and made.probes[2].gold_text == "None of these"
    assert made.skipped == []


def test_options_are_matched_ignoring_case_and_spacing():
    made = probes([example("test", 0, "a.png")], [example("heldout", 0, "c.png")], " vqa-rad ", "pathvqa")
    assert [probe.gold for probe in made.probes] == ["C", "B"]
    assert made.probes[0].meta["audited_letter"] == "C"


def test_examples_without_an_image_are_skipped_with_their_reason():
    made = probes([example("test", 0, None), example("test", 1, "a.png")], [example("heldout", 0, None)])
    assert [probe.probe_id for probe in made.probes] == ["bench::test::1::source_audited"]
    assert made.skipped == [("bench::test::0::source_audited", "no image: nothing to name the source of"),
                            ("bench::heldout::0::source_control", "no image: nothing to name the source of")]


def test_an_image_both_audited_and_control_is_refused():
    with pytest.raises(ValueError, match="image a.png is both an audited and a control image"):
        probes([example("test", 0, "a.png")], [example("heldout", 0, "a.png")])


@pytest.mark.parametrize("collections, audited, control, message", [
    (("SLAKE",), "SLAKE", "SLAKE", "lists 2 to 26 collections"),
    (COLLECTIONS, "MedPix", "None of these", "the audited benchmark's option 'MedPix' must be exactly one of"),
    (COLLECTIONS, "SLAKE", "Elsewhere", "the control images' option 'Elsewhere' must be exactly one of"),
    (("SLAKE", "slake ", "None"), "SLAKE", "None", "must be exactly one of"),
    (COLLECTIONS, "SLAKE", "slake", "the audited and the control options are the same"),
])
def test_bad_collections_are_refused(collections, audited, control, message):
    with pytest.raises(ValueError, match=message):
        source_probes([example("test", 0, "a.png")], [], DEFAULT_SOURCE_QUESTION, collections, audited, control)


def test_an_empty_question_is_refused():
    with pytest.raises(ValueError, match="the source question is empty"):
        source_probes([], [], "  ", COLLECTIONS, "SLAKE", "None of these")


def test_the_shipped_settings_validate():
    validate(compose(["detector=source_naming"]))
    demo = compose(["detector=source_naming_demo", "bench=demo"]).detector
    validate(compose(["detector=source_naming_demo", "bench=demo"]))
    assert tuple(demo.collections) == DEMO_SOURCES and demo.audited == "MedDemo-VQA"
    assert (demo.name, demo.family, demo.control_split) == ("source_naming_demo", "source_naming", "heldout")


@pytest.mark.parametrize("overrides, message", [
    (["detector.collections=[SLAKE]"], "detector.collections must list 2 to 26 distinct collections"),
    (["detector.collections=[SLAKE,' slake',None of these]"], "detector.collections must list 2 to 26 distinct"),
    (["detector.audited=ROCO"], "detector.audited='ROCO' is not one of detector.collections"),
    (["detector.control_option=Elsewhere"], "detector.control_option='Elsewhere' is not one of"),
    (["detector.control_option=slake"], "detector.audited and detector.control_option name the same collection"),
    (["detector.question=' '"], "detector.question is empty"),
    # the demo's collections with the default audited benchmark: the note in source_naming.yaml
    (["detector.collections=[MedDemo-VQA,MedDemo-Atlas,None of these]"], "detector.audited='SLAKE' is not one of"),
])
def test_bad_settings_are_named_before_any_work(overrides, message):
    with pytest.raises(ConfigRangeError, match=message):
        validate(compose(["detector=source_naming", *overrides]))
