"""The none-option and open-ended forms of a multiple-choice example (medexp.probes.option_forms)."""

from __future__ import annotations

from pathlib import Path

import pytest

from medexp.answers.prompt import render_prompt
from medexp.benchmarks.base import Example
from medexp.config.schemas import AnswerConfig
from medexp.probes.option_forms import NONE_OPTION, none_option_probe, none_option_probes, open_ended_probes


def example(answer="MRI", options=("CT", "MRI", "X-Ray", "Ultrasound"), example_id="e::1", image=Path("a.png")):
    return Example(example_id, 0, image, "Which modality?", answer, options, {"content_type": "Modality"})


def test_the_gold_goes_and_the_none_option_comes_last():
    probe = none_option_probe(example(), seed=3)
    assert probe.options == ("CT", "X-Ray", "Ultrasound", "None of the above")
    assert probe.gold == "D" and probe.meta["kept_letter"] == "B"
    assert probe.gold_text == "None of the above"
    assert "D. None of the above" in render_prompt(probe, AnswerConfig())


def test_a_last_gold_puts_the_none_option_elsewhere_so_the_letters_differ():
    positions = set()
    for seed in range(40):
        probe = none_option_probe(example(answer="Ultrasound"), seed=seed)
        assert probe.meta["kept_letter"] == "D" and probe.gold != "D"
        assert probe.options[3] in {"CT", "MRI", "X-Ray"} and "Ultrasound" not in probe.options
        positions.add(probe.gold)
    assert positions == {"A", "B", "C"}  # drawn from every other position
    assert none_option_probe(example(answer="Ultrasound"), seed=5) == none_option_probe(example(answer="Ultrasound"), seed=5)


def test_two_options_keep_one_distractor():
    probe = none_option_probe(example(answer="no", options=("yes", "no")), seed=0)
    assert probe.options == ("None of the above", "yes") and probe.gold == "A" and probe.meta["kept_letter"] == "B"


def test_examples_that_cannot_give_the_probe_are_skipped_with_their_reason():
    clash = example(answer="CT", options=("CT", "none of the above"), example_id="e::2")
    free = Example("e::3", 1, Path("b.png"), "What?", "x")
    made = none_option_probes([example(), clash, free], seed=0, none_text="None of the above")
    assert [probe.kind for probe in made.probes] == ["original", NONE_OPTION]
    reasons = dict(made.skipped)
    assert reasons["e::2::none_option"].startswith("none option clash")
    assert reasons["e::3::none_option"].startswith("no options")
    with pytest.raises(ValueError, match="empty"):
        none_option_probe(example(), 0, " ")


def test_open_ended_drops_the_options_and_keeps_the_gold_text():
    made = open_ended_probes([example()])
    original, open_probe = made.probes
    assert open_probe.options is None and open_probe.gold == "MRI" and open_probe.image == original.image
    assert open_probe.meta["hidden_options"] == ["CT", "MRI", "X-Ray", "Ultrasound"]
    assert render_prompt(open_probe, AnswerConfig()) == "Which modality?\nAnswer with a single word or phrase."
