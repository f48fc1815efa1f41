"""Schemas of the multiple-choice item asked in other forms (conf/detector/none_option.yaml,
renumbered_options.yaml, open_ended.yaml; docs/probes.md): lmms-eval's decontamination settings,
for images. Each embeds the cell's ``answer:`` section."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from medexp.config.ranges import at_least
from medexp.config.schemas.mmdetect import AnsweringDetectorBase
from medexp.config.wording import DEFAULT_LABEL_SETS, DEFAULT_NONE_OPTION


@dataclass
class NoneOptionConfig(AnsweringDetectorBase):
    """The gold option's text replaced by "None of the above": kept letter against the new answer."""

    none_text: str = DEFAULT_NONE_OPTION

    @staticmethod
    def check_values(node, path: str) -> str | None:
        if not str(node.none_text).strip():
            return f"{path}.none_text is empty: the none_option probe needs the wording of its none option"
        return None


@dataclass
class RenumberedOptionsConfig(AnsweringDetectorBase):
    """The options under other labels (1, 2, 3, ...): the paired accuracy drop."""

    # One renumbered probe per label set and example; a set needs at least as many labels as options.
    label_sets: List[List[str]] = field(default_factory=lambda: [list(labels) for labels in DEFAULT_LABEL_SETS])
    n_permutations: int = at_least(10000, 1)  # the relabelling test when there are several label sets

    @staticmethod
    def check_values(node, path: str) -> str | None:
        if not node.label_sets:
            return f"{path}.label_sets is empty: renumbered_options needs at least one label set"
        for index, labels in enumerate(node.label_sets):
            # replies are read case-insensitively ("ii" is "II"), so labels must differ in more than case
            folded = [str(label).strip().casefold() for label in labels]
            if not all(folded) or len(set(folded)) != len(folded):
                return (f"{path}.label_sets[{index}] must hold distinct, non-empty labels (case aside), "
                        f"got {list(labels)}")
        return None


@dataclass
class OpenEndedConfig(AnsweringDetectorBase):
    """The question without its options: right with them beyond guessing, wrong without them."""
