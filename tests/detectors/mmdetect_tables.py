"""Simulated benchmarks and models for the MM-Detect detectors.

A simulated model answers each probe right with a probability the test chooses (per example and
arm), else picks another answer option at random; a share of replies can be errors, no-answers or
refusals. Its replies are judged by the default judge, as a cell judges them. Nothing here knows the
detectors' statistics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from medexp.answers.table import Status, response_row
from medexp.benchmarks.base import Example
from medexp.benchmarks.options import LETTERS
from medexp.config.schemas import OptionOrderConfig, SlotGuessConfig, TextOnlyConfig
from medexp.probes.base import Probe
from tests.answers.judging import NO_ANSWER_REPLY, READ, judged_table

MODALITIES = ("CT", "MRI", "X-Ray", "Ultrasound")
ORGANS = ("brain", "lung", "liver", "kidney", "heart")


def choice_examples(n: int, seed: int, yes_share: float = 0.5) -> list[Example]:
    """Half yes/no questions (gold "yes" with probability ``yes_share``), half four- or five-option
    questions, with answer_type and content_type meta fields."""
    rng = np.random.default_rng(seed)
    examples = []
    for index in range(n):
        kind = index % 3
        if kind == 0:
            options, answer, meta = ("yes", "no"), "yes" if rng.random() < yes_share else "no", ("CLOSED", "Abnormality")
        elif kind == 1:
            options = MODALITIES
            answer, meta = MODALITIES[int(rng.integers(4))], ("OPEN", "Modality")
        else:
            options = ORGANS
            answer, meta = ORGANS[int(rng.integers(5))], ("OPEN", "Organ")
        examples.append(Example(f"sim::test::{index:05d}", index, Path(f"images/{index}.png"), f"Question {index}?",
                                answer, options, {"answer_type": meta[0], "content_type": meta[1]}))
    return examples


Rule = Callable[[Probe], float]  # probability that the model answers this probe right


def answer_choices(probes: Sequence[Probe], right: Rule, seed: int, error: float = 0.0, no_answer: float = 0.0,
                   refuse: float = 0.0, wrong: Callable[[Probe, np.random.Generator], str] | None = None):
    """The judged table of a simulated model over multiple-choice probes."""
    rng = np.random.default_rng(seed)
    rows = []
    for probe in probes:
        draw = rng.random()
        if draw < error:
            rows.append(response_row(probe, "", None, Status.error, error="HTTP 503 after 5 retries", cause="http_5xx"))
            continue
        if draw < error + no_answer:
            rows.append(response_row(probe, NO_ANSWER_REPLY))
            continue
        if probe.refusal is not None and draw < error + no_answer + refuse:
            rows.append(response_row(probe, probe.refusal))
            continue
        if rng.random() < right(probe):
            letter = probe.gold
        elif wrong is not None:
            letter = wrong(probe, rng)
        else:
            others = [letter for letter in LETTERS[:len(probe.options)] if letter not in (probe.gold, probe.refusal)]
            letter = others[int(rng.integers(len(others)))]
        rows.append(response_row(probe, letter))
    return judged_table(rows, probes)


def answer_free_text(probes: Sequence[Probe], right: Rule, seed: int, judge_cfg=READ, error: float = 0.0):
    """The judged table (``judge_cfg``) of a simulated model over free-text probes."""
    rng = np.random.default_rng(seed)
    rows = []
    for probe in probes:
        if rng.random() < error:
            rows.append(response_row(probe, "", None, Status.error, error="timeout", cause="timeout"))
            continue
        rows.append(response_row(probe, probe.gold if rng.random() < right(probe) else "something else"))
    return judged_table(rows, probes, judge_cfg)


def option_order_config(**changes):
    return OmegaConf.structured(OptionOrderConfig(name="option_order", family="option_order", **changes))


def text_only_config(**changes):
    return OmegaConf.structured(TextOnlyConfig(name="text_only", family="text_only", **changes))


def slot_guess_config(**changes):
    return OmegaConf.structured(SlotGuessConfig(name="slot_guess-demo", family="slot_guess", **changes))
