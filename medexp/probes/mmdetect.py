"""The probe sets of MM-Detect's three detectors, made from a detector config.

``seed`` is the seed the probes are drawn from. Passing a seed that does not depend on the model
(derived from the global seed, the benchmark and the detector) gives every model the same
permutations and masked words, so their cells answer identical probes and compare directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medexp.probes.choice import option_order_probes, text_only_probes
from medexp.probes.keywords import keyword_source
from medexp.probes.sets import ProbeSet
from medexp.probes.slots import SlotSettings, slot_probes


def option_order_probe_set(examples: Sequence, cfg, seed: int) -> ProbeSet:
    """``original`` and ``option_shuffle`` probes (``cfg``: an option_order detector config)."""
    return option_order_probes(examples, seed, int(cfg.n_variants))


def text_only_probe_set(examples: Sequence, cfg) -> ProbeSet:
    """``original`` and ``text_only`` probes (``cfg``: a text_only detector config)."""
    return text_only_probes(examples, str(cfg.refusal_text))


def slot_guess_probe_set(examples: Sequence, cfg, seed: int, cache_dir: str | Path) -> ProbeSet:
    """``slot_mask`` and ``back_translation`` probes (``cfg``: a slot_guess detector config):
    the texts are back-translated by ``cfg.translator`` (cached under ``cache_dir``), refused when
    more than ``cfg.max_unchanged`` come back unchanged, and masked with ``cfg.keywords``."""
    from medexp.translators import back_translate

    trips = back_translate(examples, cfg.translator, str(cfg.text_field), cache_dir, float(cfg.max_unchanged))
    source = keyword_source(cfg.keywords, examples)
    settings = SlotSettings(seed, str(cfg.slot_template), str(cfg.mask_token))
    return slot_probes(examples, [trip.source for trip in trips], [trip.back for trip in trips], source, settings)
