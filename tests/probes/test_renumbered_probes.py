"""renumbered_options' probes: the options in released order under other labels, shown in the
prompt; gold, refusal and a judged choice stay positional letters; an example with more options
than a label set holds is skipped with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from medexp.answers.cache import probe_set_hash
from medexp.answers.prompt import render_prompt
from medexp.benchmarks.base import Example
from medexp.config.schemas import AnswerConfig
from medexp.probes.base import Probe
from medexp.probes.choice import EXAMPLE_META, NoChoice, original_probe
from medexp.probes.option_forms import RENUMBERED, renumbered_probe, renumbered_probes

OPTIONS = ("Liver", "Kidney", "Spleen", "Lung")


def example(index: int = 1, options=OPTIONS, answer="Kidney") -> Example:
    return Example(f"demo::test::{index:04d}", index, Path("scan.png"), "Which organ is enlarged?", answer,
                   tuple(options) if options else None, {"answer_type": "OPEN"})


def test_the_prompt_shows_the_labels_and_the_gold_stays_positional():
    probe = renumbered_probe(example(), ["1", "2", "3", "4", "5"], 0)
    assert probe.probe_id == "demo::test::0001::renumbered::0" and probe.kind == RENUMBERED
    assert probe.options == OPTIONS and probe.labels == ("1", "2", "3", "4") == probe.shown_labels
    assert probe.gold == "B" and probe.gold_text == "Kidney"
    assert (probe.meta["gold_label"], probe.meta["canonical_gold"], probe.meta["variant"]) == ("2", "B", 0)
    assert probe.meta[EXAMPLE_META] == {"answer_type": "OPEN"}
    prompt = render_prompt(probe, AnswerConfig())
    assert "1. Liver\n2. Kidney\n3. Spleen\n4. Lung" in prompt and "A. Liver" not in prompt
    original = render_prompt(original_probe(example()), AnswerConfig())
    assert original == prompt.replace("1. ", "A. ").replace("2. ", "B. ").replace("3. ", "C. ").replace(
        "4. ", "D. ").replace("1, 2, 3, 4", "A, B, C, D")  # the same wording, only the labels differ


def test_one_probe_per_label_set_after_the_original():
    probes = renumbered_probes([example(1), example(2, answer="Lung")], [["1", "2", "3", "4"], ["i", "ii", "iii", "iv"]])
    assert [probe.probe_id.split("::", 3)[-1] for probe in probes.probes] == \
        ["original", "renumbered::0", "renumbered::1"] * 2
    assert probes.probes[2].labels == ("i", "ii", "iii", "iv") and probes.probes[2].gold == "B"
    assert probes.probes[0].labels is None and probes.probes[0].shown_labels == ("A", "B", "C", "D")
    assert [probe.gold for probe in probes.probes[3:]] == ["D"] * 3
    assert not probes.skipped


def test_too_few_labels_and_no_options_skip_the_example_with_the_reason():
    with pytest.raises(NoChoice, match="too many options: 4 exceed the 3 labels of set 1"):
        renumbered_probe(example(), ["1", "2", "3"], 1)
    probes = renumbered_probes([example(1), example(2, options=("a", "b", "c", "d", "Kidney")), example(3, options=None)],
                               [["1", "2", "3", "4"]])
    assert {probe.example_id for probe in probes.probes} == {"demo::test::0001"}
    assert [(probe_id, reason.split(":")[0]) for probe_id, reason in probes.skipped] == [
        ("demo::test::0002::renumbered", "too many options"), ("demo::test::0003::renumbered", "no options")]
    with pytest.raises(ValueError, match="at least one label set"):
        renumbered_probes([example()], [])


def test_labels_must_fit_the_options_and_enter_the_probe_set_hash(tmp_path):
    with pytest.raises(ValueError, match="3 label\\(s\\) for 4 option"):
        Probe("e::renumbered::0", "e", RENUMBERED, "q", "A", options=OPTIONS, labels=("1", "2", "3"))
    with pytest.raises(ValueError, match="distinct and non-empty"):
        Probe("e::renumbered::0", "e", RENUMBERED, "q", "A", options=OPTIONS, labels=("1", "1", "2", "3"))
    numbered = renumbered_probe(example(), ["1", "2", "3", "4"], 0)
    roman = renumbered_probe(example(), ["i", "ii", "iii", "iv"], 0)
    image = tmp_path / "scan.png"
    image.write_bytes(b"not an image, hashed as bytes")
    numbered, roman = (Probe(**{**vars(probe), "image": image}) for probe in (numbered, roman))
    assert probe_set_hash([numbered], tmp_path) != probe_set_hash([roman], tmp_path)
