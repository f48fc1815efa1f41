"""The probes of paired semantic perturbation: each original item and its perturbed twin.

* ``original``: the original example as released (its image, question, options in canonical
  order; an open question asks for the gold text);
* ``perturbed_twin``: the twin example asked the same way, under the *original's* example id
  (``<original example_id>::perturbed_twin``), so both arms pair by example; the twin's own id is
  kept in meta (``twin_example_id``) and the strata are the original's.

A pair whose items are not asked alike (one multiple choice, the other open; a gold not among
the options) is skipped with its reason, never silently dropped.
"""

from __future__ import annotations

from dataclasses import replace
from collections.abc import Iterable

from medexp.benchmarks.base import Example
from medexp.probes.base import Probe
from medexp.probes.choice import EXAMPLE_META, ORIGINAL, NoChoice, collect_probes, example_meta, original_probe
from medexp.probes.sets import ProbeSet

PERTURBED_TWIN = "perturbed_twin"
TWIN_EXAMPLE_ID = "twin_example_id"


def question_probe(example: Example) -> Probe:
    """The example as released: a multiple-choice probe when it has options, else an open question."""
    if example.options:
        return original_probe(example)
    return Probe(probe_id=f"{example.example_id}::{ORIGINAL}", example_id=example.example_id, kind=ORIGINAL,
                 question=example.question, gold=example.answer, image=example.image,
                 meta={"variant": None, EXAMPLE_META: example_meta(example)})


def twin_probe(original: Example, twin: Example) -> Probe:
    """``twin`` asked as :func:`question_probe` asks it, filed under ``original``'s example id."""
    if bool(original.options) != bool(twin.options):
        kinds = ["open", "multiple choice"]
        raise NoChoice(f"format mismatch: the original is {kinds[bool(original.options)]}, "
                       f"its twin {twin.example_id} {kinds[bool(twin.options)]}")
    asked = question_probe(twin)
    return replace(asked, probe_id=f"{original.example_id}::{PERTURBED_TWIN}", example_id=original.example_id,
                   kind=PERTURBED_TWIN,
                   meta={**asked.meta, TWIN_EXAMPLE_ID: twin.example_id, EXAMPLE_META: example_meta(original)})


def twin_probes(pairs: Iterable[tuple[Example, Example]]) -> ProbeSet:
    """Per pair its ``original`` and ``perturbed_twin`` probes (pair order kept)."""
    return collect_probes(pairs, lambda pair: [question_probe(pair[0]), twin_probe(*pair)],
                          lambda pair: f"{pair[0].example_id}::{PERTURBED_TWIN}")
