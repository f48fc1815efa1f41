"""What the rest of medexp knows about a detector, declared once beside the detector itself.

Each detector module ends with its ``DECLARATION``: its name (the key its schema is stored under
in :data:`medexp.config.schemas.DETECTOR_SCHEMAS`), its schema, its evaluator (as a
``"module:function"`` string, so this layer names the evaluator above it without importing it),
the inputs a cell loads for it, the controls that fit it, its power entry and how
``python -m medexp.power`` counts its n, for a detector that asks questions the function making its
probe set (what ``python -m medexp.export`` writes out for a harness), the artefact tables and
figures of the report its runs feed, and its documentation page.
The runner, the controls, ``medexp.power``, ``medexp.plan`` and the report read these
declarations (:mod:`medexp.detectors`'s table finds them) instead of switching on schema types or
listing detector names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping

from medexp.config.schemas import ControlKind
from medexp.stats.detector_power import PowerFormula


class Input(str, Enum):
    """What a detector reads beyond the benchmark's examples."""

    model = "model"                # the model itself: it scores new text or answers probes
    scores = "scores"              # the model's per-example score table (a record of scores will do)
    token_scores = "token_scores"  # per-token scores over the vocabulary (Min-K%++)
    answers = "answers"            # the model's answers to probes
    images = "images"              # the benchmark's images, compared as images
    corpus = "corpus"              # a reference image corpus (detector.corpus), loaded with the cell's inputs
    twin = "twin"                  # the benchmark's perturbed twin (bench.twin), loaded with the cell's inputs
    flags = "flags"                # a flag per example from its flag source (detector.flags), with the cell's inputs
    references = "references"      # other models scored on the same examples (cohort, reference models)
    nonmembers = "nonmembers"      # another split of the benchmark, as non-members (detector.nonmember_split)
    trained_pairs = "trained_pairs"  # models trained with and without the examples (detector.pairs)


# The controls that reorder or strip a scored benchmark, or add a baseline model: they fit every
# detector that scores the benchmark with a model, unless its declaration says otherwise.
SCORING_CONTROLS = frozenset({ControlKind.none, ControlKind.order_hash, ControlKind.order_answer_len,
                              ControlKind.order_mink, ControlKind.external_baseline, ControlKind.blind_image})


@dataclass(frozen=True)
class Simulated:
    """A power entry for a test without a closed formula: its MDE is simulated
    (:mod:`medexp.detectors.power_simulation`, whose table holds the simulated test)."""

    test: str  # the test the detector runs, in words


@dataclass(frozen=True)
class Untested:
    """A power entry for a detector that tests nothing: no p-value, so no power and no MDE."""

    what: str  # what the detector is instead, in words


@dataclass(frozen=True)
class PowerCount:
    """What ``python -m medexp.power`` counted on a benchmark for a detector: ``n`` in its
    formula's unit (all units, for a two-arm test), ``first`` the first arm of a two-arm test
    (members, flagged images; the rest is the second), ``chance`` an above-chance test's rate,
    ``sizes`` the sizes a simulated test runs on, and ``lines`` how they were counted."""

    n: int
    lines: tuple[str, ...] = ()
    first: int | None = None
    chance: float | None = None
    sizes: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class DetectorDeclaration:
    name: str
    schema: type  # its config schema, a DetectorBase subclass
    evaluator: str  # "module:function" of its evaluator (medexp.evaluators.<family>)
    inputs: frozenset[Input]
    controls: frozenset[ControlKind]  # the controls that fit it; any other is refused before the cell loads
    power: PowerFormula | Simulated | Untested
    # "module:function" counting its n on a benchmark for medexp.power: (cfg, load) -> PowerCount, where
    # load(split=None) loads the cell's benchmark (or another split of it); None when it tests nothing
    power_count: str | None
    docs: str  # the page (and section) of docs/ that explains it
    # why a control it does not take cannot apply, where the reason is its own (a control's general
    # reason, medexp.controls.fit, answers otherwise)
    control_reasons: Mapping[ControlKind, str] = field(default_factory=dict)
    # tables of its artefacts a report reads: table name -> (the config parameter marking its runs, the artefact)
    report_tables: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    report_figures: tuple[str, ...] = ()  # the report's figures its cells feed
    # "module:function" making the probe set a model answers, (CellContext) -> ProbeSet, for a
    # detector that reads answers: its evaluator asks those probes, and python -m medexp.export
    # writes them out for a harness; None for a detector that asks nothing
    probes: str | None = None

    def __post_init__(self):
        unknown = set(self.control_reasons) & self.controls
        if unknown:
            raise ValueError(f"detector {self.name}: a reason is given for refusing controls it takes: "
                             f"{sorted(kind.value for kind in unknown)}")
        if (Input.answers in self.inputs) != (self.probes is not None):
            raise ValueError(f"detector {self.name}: a probe-set function goes with reading answers, and only with it")
        if isinstance(self.power, Untested) != (self.power_count is None):
            raise ValueError(f"detector {self.name}: a power count goes with a test, and only with one")
