"""Schemas of MM-Detect's three detectors (conf/detector/option_order.yaml, slot_guess.yaml,
text_only.yaml): each embeds the cell's ``answer:`` section, so both arms of its comparison are
asked and judged alike, and declares how its probes are made."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, List

from omegaconf import MISSING

from medexp.config.ranges import at_least, fraction, probability
from medexp.config.schemas.answers import AnswerConfig
from medexp.config.schemas.detector import DetectorBase
from medexp.config.schemas.keywords import KeywordConfig
from medexp.config.wording import DEFAULT_MASK, DEFAULT_REFUSAL, DEFAULT_TEMPLATE, check_template


@dataclass
class AnsweringDetectorBase(DetectorBase):
    answer: AnswerConfig = field(default_factory=AnswerConfig)
    # Meta fields to break the results down by (an example without the field is "(missing)").
    strata: List[str] = field(default_factory=lambda: ["answer_type", "content_type"])
    ci_level: float = probability(0.95)  # Wilson intervals of the accuracies


@dataclass
class OptionOrderConfig(AnsweringDetectorBase):
    """Option order sensitivity: canonical options against shuffles that move the gold."""

    n_variants: int = at_least(1, 1)  # shuffles per example, each its own probe
    n_permutations: int = at_least(10000, 1)  # the relabelling test when n_variants > 1 (p floor 1/(P+1))


@dataclass
class SlotGuessConfig(AnsweringDetectorBase):
    """Slot guessing: one keyword masked in a text and, the same word, in its back-translation."""

    translator: Any = MISSING  # a translator config (conf/translator); its schema comes from its own defaults list
    keywords: KeywordConfig = field(default_factory=KeywordConfig)
    text_field: str = "question"  # question, answer, or meta.<key> (a caption field)
    mask_token: str = DEFAULT_MASK
    # The probe's question, the same in both arms: {text} the masked text, {mask} the mask token.
    slot_template: str = DEFAULT_TEMPLATE
    # More than this share of texts coming back unchanged refuses the translator (an identity
    # translator would make the two arms identical); the unchanged ones below it are skipped.
    max_unchanged: float = fraction(0.5)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        try:
            check_template(node.slot_template, node.mask_token)
        except ValueError as error:
            return f"{path}.slot_template / {path}.mask_token: {error}"
        field_ = str(node.text_field)
        if field_ not in ("question", "answer") and not (field_.startswith("meta.") and len(field_) > 5):
            return f"{path}.text_field={field_!r}: use question, answer or meta.<key> (e.g. meta.caption)"
        return None


class ChanceModel(str, Enum):
    uniform = "uniform"  # 1 / (number of options, the refusal not counted)
    prior = "prior"  # the accuracy of always answering the most frequent gold text of the option set


@dataclass
class TextOnlyConfig(AnsweringDetectorBase):
    """The text-only probe: the question without its image, with an explicit refusal option."""

    refusal_text: str = DEFAULT_REFUSAL
    chance: ChanceModel = ChanceModel.prior
    # prior: meta fields added to the option set when grouping examples (e.g. [content_type]).
    prior_by: List[str] = field(default_factory=list)
    # prior: groups with fewer examples fall back to the uniform rate (a group of one would claim
    # its own gold as a certainty).
    min_prior_group: int = at_least(5, 1)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        if not str(node.refusal_text).strip():
            return f"{path}.refusal_text is empty: the text-only probe needs its refusal option's wording"
        return None
