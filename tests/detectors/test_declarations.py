"""Every detector is one declaration: the table finds each, each names its own schema, an evaluator
that imports and sits in the family module beside its schema's, a power entry with a count that
imports, and every conf/detector option reaches its declaration and its evaluator."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from omegaconf import OmegaConf

import medexp  # noqa: F401  (registers the schemas compose relies on)
from medexp.config import compose, conf_dir
from medexp.config.schemas import DETECTOR_SCHEMAS, ControlKind, DetectorBase
from medexp.detectors import DETECTORS, declaration_for, declaration_of
from medexp.detectors.declaration import DetectorDeclaration, Input, Untested
from medexp.evaluators import evaluator_for
from medexp.kernel.registry import import_object

DETECTOR_OPTIONS = sorted(path.stem for path in (conf_dir() / "detector").glob("*.yaml"))


def test_the_table_declares_every_detector_schema():
    assert sorted(DETECTORS) == sorted(DETECTOR_SCHEMAS)


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_each_declaration_sits_in_its_detectors_module_and_names_its_schema(name):
    declaration = declaration_of(name)
    assert declaration.name == name and declaration.schema is DETECTOR_SCHEMAS[name]
    assert DETECTORS[name] == f"medexp.detectors.{name}:DECLARATION"


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_the_evaluator_and_the_power_count_import_and_sit_beside_the_schemas_family(name):
    declaration = declaration_of(name)
    assert callable(import_object(declaration.evaluator))
    family = declaration.evaluator.split(":")[0].removeprefix("medexp.evaluators.")
    assert declaration.schema.__module__ == f"medexp.config.schemas.{family}"
    if declaration.power_count is not None:
        assert callable(import_object(declaration.power_count))
    if declaration.probes is not None:  # an answering detector's probe set, asked by its evaluator and exported
        assert callable(import_object(declaration.probes))
        assert declaration.probes.split(":")[0] == declaration.evaluator.split(":")[0]
    assert (conf_dir().parent / declaration.docs.split("#")[0]).is_file(), declaration.docs


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_what_the_schema_says_the_model_must_give_is_among_the_declared_inputs(name):
    declaration = declaration_of(name)
    needs = declaration.schema.model_needs
    if needs in ("scores", "token_scores"):
        assert Input(needs) in declaration.inputs
    assert ControlKind.none in declaration.controls  # every detector runs without a control


@pytest.mark.parametrize("option", DETECTOR_OPTIONS)
def test_every_detector_option_reaches_its_declaration_and_evaluator(option):
    detector = compose([f"detector={option}"]).detector
    assert declaration_for(detector).name in DETECTORS
    assert callable(evaluator_for(detector))


def test_a_schema_without_a_declaration_is_refused_by_name():
    @dataclass
    class UnknownDetectorConfig(DetectorBase):
        pass

    with pytest.raises(NotImplementedError, match="no declaration for detector schema UnknownDetectorConfig"):
        evaluator_for(OmegaConf.structured(UnknownDetectorConfig(name="unknown", family="unknown")))


def test_an_inconsistent_declaration_is_refused():
    common = dict(name="toy", schema=DetectorBase, evaluator="x:y", inputs=frozenset(), docs="docs/x.md")
    with pytest.raises(ValueError, match="a reason is given for refusing controls it takes"):
        DetectorDeclaration(**common, controls=frozenset({ControlKind.none}), power=Untested("nothing"),
                            power_count=None, control_reasons={ControlKind.none: "why"})
    with pytest.raises(ValueError, match="a power count goes with a test"):
        DetectorDeclaration(**common, controls=frozenset({ControlKind.none}), power=Untested("nothing"),
                            power_count="x:count")
    reading_answers = {**common, "inputs": frozenset({Input.answers})}
    with pytest.raises(ValueError, match="a probe-set function goes with reading answers, and only with it"):
        DetectorDeclaration(**reading_answers, controls=frozenset({ControlKind.none}), power=Untested("nothing"),
                            power_count=None)
