"""Which translator a ``translator`` config describes, and the round trips of a field through it.

The translators are named by ``"module:Class"`` strings, so that only the chosen one's module
(Marian's loads transformers) is imported, and none imports this table back.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medexp.translators.base import RoundTrip, Translator, check_changed

# translator schema name (medexp.config.schemas.TRANSLATOR_SCHEMAS) -> its class, built from (cfg, cache_dir)
TRANSLATORS = {
    "marian": "medexp.translators.marian:MarianTranslator",
    "demo": "medexp.translators.demo:DemoTranslator",
}


def load_translator(cfg, cache_dir: str | Path) -> Translator:
    """The translator a ``translator`` config (conf/translator/*.yaml) describes."""
    from omegaconf import OmegaConf

    from medexp.config.schemas import TRANSLATOR_SCHEMAS
    from medexp.kernel.registry import import_object

    schema = OmegaConf.get_type(cfg)
    name = next((name for name, node in TRANSLATOR_SCHEMAS.items() if node is schema), None)
    if name is None:
        raise ValueError(f"translator {getattr(cfg, 'name', None)!r} has no known schema "
                         f"({getattr(schema, '__name__', schema)}); its YAML must start with "
                         "`defaults: [/schema/translator@_here_: <marian|demo>, _self_]`")
    return import_object(TRANSLATORS[name])(cfg, cache_dir)


def back_translate(examples: Sequence, translator_cfg, field: str, cache_dir: str | Path,
                   max_unchanged: float) -> list[RoundTrip]:
    """The round trips of every example's ``field``, refused when too many come back unchanged."""
    translator = load_translator(translator_cfg, cache_dir)
    trips = translator.back_translate(examples, field)
    check_changed(trips, max_unchanged, translator.name)
    return trips
