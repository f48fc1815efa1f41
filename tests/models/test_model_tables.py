"""The model tables cover every family and source a model config can name, and every target imports."""

from __future__ import annotations

from pathlib import Path

import pytest

from medexp.config import compose
from medexp.config.schemas import ModelBackend, ModelFamily, ModelSource
from medexp.config.schemas.model import VLLM_FAMILIES
from medexp.models import ADAPTERS, BACKENDS, BLACK_BOX_FAMILIES, BUILT_SOURCES, FILE_DIGESTS, FILE_SOURCES
from medexp.kernel.registry import import_object

CONF_MODELS = sorted(path.stem for path in (Path(__file__).parents[2] / "conf" / "model").glob("*.yaml"))
WEIGHTLESS_SOURCES = {ModelSource.hub.value, ModelSource.synthetic.value}  # loaded as named, or no weights


def test_every_family_has_an_adapter_or_is_a_black_box():
    assert {family.value for family in ModelFamily} == set(ADAPTERS) | set(BLACK_BOX_FAMILIES)
    assert not set(ADAPTERS) & set(BLACK_BOX_FAMILIES)
    # a file of answers (a black-box family) or of scores (a source)
    assert set(FILE_DIGESTS) == set(BLACK_BOX_FAMILIES) - {ModelFamily.openai_compatible.value} | set(FILE_SOURCES)


def test_every_backend_but_transformers_has_a_scorer():
    # transformers scores through each family's adapter (ADAPTERS)
    assert set(BACKENDS) == {backend.value for backend in ModelBackend} - {ModelBackend.transformers.value}
    assert VLLM_FAMILIES <= set(ADAPTERS)  # vLLM serves families that have scoring adapters' prompts


def test_every_built_source_has_a_builder():
    assert {source.value for source in ModelSource} == set(BUILT_SOURCES) | WEIGHTLESS_SOURCES | set(FILE_SOURCES)


def test_every_table_target_imports():
    # BACKENDS' targets import without their engines (vLLM is imported when it loads)
    targets = [*ADAPTERS.values(), *BACKENDS.values(), *(spec for _, spec in BUILT_SOURCES.values()),
               *FILE_DIGESTS.values()]
    for spec in targets:
        assert callable(import_object(spec)), spec


@pytest.mark.parametrize("model", CONF_MODELS)
def test_every_model_config_resolves_through_the_tables(model):
    cfg = compose([f"model={model}"]).model
    family, source = ModelFamily(cfg.family).value, ModelSource(cfg.source).value
    assert family in ADAPTERS or family in BLACK_BOX_FAMILIES, family
    assert source in BUILT_SOURCES or source in WEIGHTLESS_SOURCES or source in FILE_SOURCES, source
    if source in FILE_SOURCES:
        assert cfg.get(source) is not None, f"model={model}: source {source} needs its `{source}:` section"
    if source in BUILT_SOURCES:
        section, builder = BUILT_SOURCES[source]
        assert cfg.get(section) is not None, f"model={model}: source {source} needs its `{section}:` section"
        assert callable(import_object(builder))
