"""Schemas of the translator group (conf/translator/): how slot guessing gets the back-translated
(English -> pivot -> English) twin of each text. Composed into a detector as
``translator@detector.translator``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from omegaconf import MISSING

from medexp.config.ranges import at_least


@dataclass
class TranslatorBase:
    name: str = MISSING


@dataclass
class MarianDirection:
    """One translation direction: a Marian checkpoint (hub id or local ``save_pretrained`` directory)."""

    model: str = MISSING
    revision: Optional[str] = None  # a hub commit or tag; pin it for a reproducible audit
    # Prepended to every source text: the target-language token of a multilingual model
    # (opus-mt-en-zh needs ">>cmn_Hans<<" for simplified Chinese). None: nothing.
    prefix: Optional[str] = None


@dataclass
class MarianTranslatorConfig(TranslatorBase):
    """Marian MT through transformers (MarianMTModel, MarianTokenizer), deterministic decoding."""

    pivot: str = "zh"  # the pivot language, for the record
    forward: MarianDirection = field(default_factory=lambda: MarianDirection(
        model="Helsinki-NLP/opus-mt-en-zh", prefix=">>cmn_Hans<<"))
    backward: MarianDirection = field(default_factory=lambda: MarianDirection(model="Helsinki-NLP/opus-mt-zh-en"))
    batch_size: int = at_least(16, 1)
    # tokens of a source text (longer ones are truncated and counted) and of a translation
    max_length: int = at_least(256, 8)
    num_beams: int = at_least(4, 1)  # beam search width; 1 = greedy. Either way deterministic (no sampling)
    device: str = "auto"  # auto: cuda when available, else cpu
    shard_size: int = at_least(512, 1)  # texts per cache shard: the unit an interrupted run resumes from


@dataclass
class DemoTranslatorConfig(TranslatorBase):
    """The demo benchmark's offline stand-in: the question rewritten with another of the demo
    generator's templates, read from each example's ``meta[meta_field]``."""

    meta_field: str = "paraphrase"
