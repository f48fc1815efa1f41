"""The evaluator table: every detector kind and every conf/detector option reaches its evaluator
through EVALUATORS, each entry imports, and it sits in the family module beside its schema's."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from omegaconf import OmegaConf

import medexp  # noqa: F401  (registers the schemas compose relies on)
from medexp.config import compose, conf_dir
from medexp.config.schemas import DETECTOR_SCHEMAS, DetectorBase
from medexp.evaluators import EVALUATORS, detector_kind, evaluator_for
from medexp.registry import import_object

DETECTOR_OPTIONS = sorted(path.stem for path in (conf_dir() / "detector").glob("*.yaml"))


def test_the_table_names_an_evaluator_for_every_detector_schema():
    assert sorted(EVALUATORS) == sorted(DETECTOR_SCHEMAS)


@pytest.mark.parametrize("kind", sorted(EVALUATORS))
def test_every_entry_imports_and_sits_beside_its_schema(kind):
    assert callable(import_object(EVALUATORS[kind]))
    module = EVALUATORS[kind].split(":")[0]
    family = module.removeprefix("medexp.evaluators.")
    assert DETECTOR_SCHEMAS[kind].__module__ == f"medexp.config.schemas.{family}"


@pytest.mark.parametrize("option", DETECTOR_OPTIONS)
def test_every_detector_option_reaches_its_evaluator(option):
    detector = compose([f"detector={option}"]).detector
    assert detector_kind(detector) in EVALUATORS
    assert callable(evaluator_for(detector))


def test_a_schema_without_an_evaluator_is_refused_by_name():
    @dataclass
    class UnknownDetectorConfig(DetectorBase):
        pass

    with pytest.raises(NotImplementedError, match="no evaluator for detector schema UnknownDetectorConfig"):
        evaluator_for(OmegaConf.structured(UnknownDetectorConfig(name="unknown", family="unknown")))
