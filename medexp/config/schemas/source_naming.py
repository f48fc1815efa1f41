"""Schema of DIS-CO's collection question (conf/detector/source_naming.yaml; docs/probes.md): each
image asked which public collection it comes from, the audited images against a control set."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, List

from medexp.config.schemas.mmdetect import AnsweringDetectorBase
from medexp.config.wording import DEFAULT_SOURCE_QUESTION


@dataclass
class SourceNamingConfig(AnsweringDetectorBase):
    """DIS-CO's question: which collection an image comes from, audited images against a control set."""

    example_fields: ClassVar[tuple[str, ...]] = ()  # the images are asked about, not the questions
    question: str = DEFAULT_SOURCE_QUESTION
    # The options, in the order every image is shown them: the audited benchmark, other public
    # collections, and an option for none of them.
    collections: List[str] = field(default_factory=lambda: [
        "SLAKE", "PathVQA", "VQA-RAD", "OmniMedVQA", "MedPix", "None of these"])
    audited: str = "SLAKE"  # the option naming the audited benchmark
    control_option: str = "None of these"  # the option naming the control images' collection
    control_split: str = "heldout"  # the split of the same benchmark holding the control images
    # Meta fields the audited and control images are matched on (the Mantel-Haenszel strata).
    match_by: List[str] = field(default_factory=lambda: ["modality"])
    strata: List[str] = field(default_factory=lambda: ["modality"])

    @staticmethod
    def check_values(node, path: str) -> str | None:
        from string import ascii_uppercase as letters

        def normalise(text) -> str:  # options compare as medexp.benchmarks.options.normalise (above config) does
            return " ".join(str(text).split()).casefold()

        names = [normalise(name) for name in node.collections]
        if not 2 <= len(names) <= len(letters) or len(set(names)) != len(names):
            return (f"{path}.collections must list 2 to {len(letters)} distinct collections (one letter each), "
                    f"got {list(node.collections)}")
        for key in ("audited", "control_option"):
            if normalise(node[key]) not in names:
                return f"{path}.{key}={node[key]!r} is not one of {path}.collections {list(node.collections)}"
        if normalise(node.audited) == normalise(node.control_option):
            return f"{path}.audited and {path}.control_option name the same collection ({node.audited!r})"
        if not str(node.question).strip():
            return f"{path}.question is empty"
        return None
