"""The translator table names a translator for every translator schema, and every one imports."""

from medexp.config.schemas import TRANSLATOR_SCHEMAS
from medexp.kernel.registry import import_object
from medexp.translators.base import Translator
from medexp.translators.load import TRANSLATORS


def test_every_translator_schema_has_a_translator():
    assert set(TRANSLATORS) == set(TRANSLATOR_SCHEMAS)


def test_every_translator_imports():
    for name, spec in TRANSLATORS.items():
        assert issubclass(import_object(spec), Translator), f"{name}: {spec}"
