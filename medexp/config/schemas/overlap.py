"""Schemas of the overlap-gap detectors (conf/detector/overlap_gap.yaml, overlap_gap_answers.yaml):
does a model score higher, or answer better, on the examples whose image an overlap test flagged
than on the rest? And of the flag source both read (conf/flags/), declared once."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, List, Optional

from omegaconf import MISSING

from medexp.config.ranges import at_least, positive, probability
from medexp.config.schemas.answers import AnswerConfig
from medexp.config.schemas.detector import FREE_TEXT_FIELDS, QUESTION_FIELDS, DetectorBase
from medexp.kernel.hashing import stable_hash


class FlagSourceKind(str, Enum):
    column = "column"  # a flag column of a record of scores (the controlled audit's `flagged`)
    split_overlap = "split_overlap"  # the release's own splits naming the same image file: no pixel read
    image_nn = "image_nn"  # image_nn's flags (exact copies and near-duplicates) against a corpus


# The fields each kind reads, each of which changes its flags (and its name, hence the cell key); the
# others stay unset (a field set for another kind is a mistake).
FLAG_SOURCE_FIELDS = {FlagSourceKind.column: ("column",), FlagSourceKind.split_overlap: ("splits",),
                      FlagSourceKind.image_nn: ("image_nn",)}
# What a field may hold when it joins the cell key (no = or , of a key; + joins split names).
_KEY_WORD = re.compile(r"[A-Za-z0-9_.\-]+")
# The record's own flag column of the controlled audit: a cell reading it from its own record keeps
# the detector's historical key (detector=overlap_gap), so its tracked runs still count.
HISTORICAL_COLUMN = "flagged"


def flag_source_name(kind: str, *fields) -> str:
    """A flag source's name, derived from the fields its kind reads (conf/flags/*.yaml call it as
    the resolver ``medexp.flag_source``): ``split_<splits joined by +>`` (sorted: their union is
    what flags), ``record_<column>`` for the cell's own record or ``record_<column>_of_<record>``
    for another; image_nn sources are named by their image_nn config (its backbone and corpus)."""
    kind = FlagSourceKind(kind)
    if kind is FlagSourceKind.split_overlap:
        (splits,) = fields
        return "split_" + "+".join(sorted(str(split) for split in splits or ()))
    if kind is FlagSourceKind.column:
        column, record = fields
        return f"record_{column}" + ("" if record is None else f"_of_{_record_word(str(record))}")
    (image_nn_name,) = fields
    return str(image_nn_name)


def flag_source_key(node) -> str:
    """What a flag source adds to its consumer's detector name, hence to the cell key (the resolver
    ``medexp.flag_key``): "-" and its name derived from its fields, so two flag configurations are
    two cells; nothing for the record's own flag column (the historical key)."""
    kind = FlagSourceKind(node.kind)
    if kind is FlagSourceKind.column and node.model is None and node.column == HISTORICAL_COLUMN:
        return ""
    fields = {FlagSourceKind.split_overlap: lambda: (node.splits,),
              FlagSourceKind.column: lambda: (node.column, node.model),
              FlagSourceKind.image_nn: lambda: (node.image_nn.name,)}[kind]()
    return "-" + flag_source_name(kind.value, *fields)


def _record_word(entry: str) -> str:
    """A record entry as a key word: its conf/model name, and for an entry with overrides
    (``"scores scores.path=/data/b.json"``) a digest of them (a path has no place in a key)."""
    name, *overrides = entry.split()
    return name if not overrides else f"{name}_{stable_hash(overrides, length=8)}"


@dataclass
class FlagSourceConfig:
    """Where an overlap gap's flags come from (conf/flags/*.yaml, the detector's ``flags:``)."""

    # In messages and logs; the conf/flags files derive it from the fields below (flag_source_name),
    # and the cell key takes its part from those fields, never from a name written down.
    name: str = MISSING
    kind: FlagSourceKind = MISSING
    # column: the record's field holding each example's flag (true/false, 1/0), and the record
    # (a conf/model name of a record of scores) that holds it; null: the cell's own model.
    column: Optional[str] = None
    model: Optional[str] = None
    # split_overlap: the other splits of the cell's benchmark whose image names flag its examples
    # (an example is flagged when its image, named by the detector's image_field, is also one of theirs).
    splits: Optional[List[str]] = None
    # image_nn: an image_nn detector config (conf/detector/image_nn.yaml: embedder, corpus, tau_alpha,
    # ...); its schema comes from its own defaults list. The flags are the ones an image_nn cell
    # with this config gives (same code, cache and seed).
    image_nn: Optional[Any] = None

    @staticmethod
    def check_values(node, path: str) -> str | None:
        kind = FlagSourceKind(node.kind)
        wanted = FLAG_SOURCE_FIELDS[kind]
        missing = [name for name in wanted if node.get(name) in (None, [])]
        if missing:
            return f"{path}: flag source {node.name} (kind {kind.value}) needs {path}.{missing[0]}"
        stray = [name for other, names in FLAG_SOURCE_FIELDS.items() if other is not kind for name in names
                 if node.get(name) not in (None, [])]
        if stray:
            return (f"{path}.{stray[0]} is read by another kind of flag source; flag source {node.name} is of kind "
                    f"{kind.value}, which reads {', '.join(f'{path}.{name}' for name in wanted)}")
        if kind is not FlagSourceKind.column and node.get("model") is not None:
            return f"{path}.model names the record holding a flag column: only kind column reads it"
        if kind is FlagSourceKind.split_overlap and len(set(node.splits)) != len(node.splits):
            return f"{path}.splits repeats a split: {list(node.splits)}"
        keyed = {FlagSourceKind.split_overlap: [("splits", str(split)) for split in node.splits or ()],
                 FlagSourceKind.column: [("column", str(node.column))], FlagSourceKind.image_nn: []}[kind]
        unkeyable = [(name, word) for name, word in keyed if not _KEY_WORD.fullmatch(word)]
        if unkeyable:
            name, word = unkeyable[0]
            return (f"{path}.{name}: {word!r} joins the cell key's detector name: letters, digits, _ . - only")
        return None


@dataclass
class OverlapGapBase(DetectorBase):
    """The gap between flagged and unflagged examples, images resampled and permuted."""

    flags: FlagSourceConfig = MISSING  # the flag source (conf/flags/)
    # The example meta field naming its image (SLAKE: img_name, VQA-RAD: image_name); questions on
    # one image are one cluster, and split_overlap matches splits by it. An example without it falls
    # back to its image path, else is a cluster of its own.
    image_field: str = "img_name"
    strata: List[str] = field(default_factory=lambda: ["answer_type"])  # meta fields: the gap per value as well
    # A model config (conf/model) on the same examples with the same flags, contamination-free
    # (BLIP-2 predates the overlap source): the target's gap minus its gap is reported too.
    baseline: Optional[str] = None
    n_permutations: int = at_least(10000, 1)  # image-flag permutations of the p-values
    n_resamples: int = at_least(2000, 10)  # image bootstrap resamples of the intervals
    confidence: float = probability(0.95)
    # The smallest gap worth finding, as Cohen's d of the image means (0.8: "large"): a cell whose
    # MDE exceeds it is underpowered (metric underpowered, and a warning when its gap is not significant).
    sizeable_effect: float = positive(0.8)


@dataclass
class OverlapGapConfig(OverlapGapBase):
    """Gap in mean teacher-forced score (a record of scores serves)."""

    example_fields: ClassVar[tuple[str, ...]] = FREE_TEXT_FIELDS
    model_needs: ClassVar[str] = "scores"
    score: str = "mean_logprob"  # the score compared (a record holds one of mean_logprob, sum_logprob)


@dataclass
class OverlapGapAnswersConfig(OverlapGapBase):
    """Gap in accuracy: the model answers every example as released (white box, server, imported file)."""

    example_fields: ClassVar[tuple[str, ...]] = QUESTION_FIELDS
    answer: AnswerConfig = field(default_factory=AnswerConfig)
