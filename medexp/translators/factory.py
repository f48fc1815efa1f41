"""The translator a ``translator`` config names, and the round trips of a cell's examples through it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medexp.translators.base import RoundTrip, Translator, check_changed


def load_translator(cfg, cache_dir: str | Path) -> Translator:
    """The translator a ``translator`` config (conf/translator/*.yaml) describes."""
    from omegaconf import OmegaConf

    from medexp.config.schemas.translator import DemoTranslatorConfig, MarianTranslatorConfig

    schema = OmegaConf.get_type(cfg)
    if schema is MarianTranslatorConfig:
        from medexp.translators.marian import MarianTranslator

        return MarianTranslator(cfg, cache_dir)
    if schema is DemoTranslatorConfig:
        from medexp.translators.demo import DemoTranslator

        return DemoTranslator(cfg)
    raise ValueError(f"translator {getattr(cfg, 'name', None)!r} has no known schema "
                     f"({getattr(schema, '__name__', schema)}); its YAML must start with "
                     "`defaults: [/schema/translator@_here_: <marian|demo>, _self_]`")


def back_translate(examples: Sequence, translator_cfg, field: str, cache_dir: str | Path,
                   max_unchanged: float) -> list[RoundTrip]:
    """The round trips of every example's ``field``, refused when too many come back unchanged."""
    translator = load_translator(translator_cfg, cache_dir)
    trips = translator.back_translate(examples, field)
    check_changed(trips, max_unchanged, translator.name)
    return trips
