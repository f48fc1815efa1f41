"""MM-Detect's multiple-choice probes: the original question, its option shuffles and its
text-only twin.

* ``original``: the example as released: its image, question and options in canonical order;
  the gold letter is the gold option's position;
* ``option_shuffle``: the same image and question with the options permuted so that the gold
  option always lands on another letter. The gold's new position is drawn uniformly from the
  other positions, then the other options fill the remaining positions in a uniformly random
  order: a uniform draw from every permutation that moves the gold. ``n_variants`` permutations
  per example are drawn independently, each from its own stream
  (``derive_seed(seed, example_id, "option_shuffle", variant)``), with ids
  ``<example_id>::option_shuffle::<variant>`` (variant 0, 1, ...). With two options every
  variant is the swap;
* ``text_only``: the question and options without the image, plus an explicit refusal option
  ("I don't know", configurable) appended last; its letter is the probe's ``refusal``. The gold
  keeps its canonical letter. Its with-image counterpart is the ``original`` probe.

A probe's letters depend on its own example and the cell seed only, never on which other
examples are probed. Examples that cannot give a probe (no options, gold not among the options,
fewer than two options, already without image) are returned as skips with their reason, one per
example, never silently dropped.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable, Iterable

import numpy as np

from medexp.benchmarks.options import LETTERS, normalise
from medexp.config.wording import DEFAULT_REFUSAL
from medexp.kernel.hashing import derive_seed
from medexp.probes.base import Probe
from medexp.probes.sets import ProbeSet

ORIGINAL = "original"
OPTION_SHUFFLE = "option_shuffle"
TEXT_ONLY = "text_only"
EXAMPLE_META = "example_meta"  # Probe.meta key holding the example's scalar meta fields (strata)


class NoChoice(ValueError):
    """An example that cannot be asked as a multiple-choice question; the message is the skip reason."""


def canonical_gold(example) -> int:
    """The position of the gold option among the example's options (exact text first, then
    case- and spacing-insensitive); :class:`NoChoice` when there is none or more than one."""
    options = example.options
    if not options:
        raise NoChoice("no options: the example is not multiple choice")
    exact = [index for index, option in enumerate(options) if option == example.answer]
    matches = exact or [index for index, option in enumerate(options) if normalise(option) == normalise(example.answer)]
    if not matches:
        raise NoChoice(f"gold not among options: {example.answer!r} is not one of {list(options)}")
    if len(matches) > 1:
        raise NoChoice(f"ambiguous gold: {example.answer!r} matches options {[LETTERS[i] for i in matches]}")
    if len(options) > len(LETTERS):
        raise NoChoice(f"too many options: {len(options)} exceed the {len(LETTERS)} letters")
    return matches[0]


def example_meta(example) -> dict[str, Any]:
    """The example's scalar meta fields (the strata a detector can break results down by)."""
    return {key: value for key, value in example.meta.items()
            if value is None or isinstance(value, (str, int, float, bool))}


def original_probe(example) -> Probe:
    """The example as released, options in canonical order."""
    gold = canonical_gold(example)
    return Probe(
        probe_id=f"{example.example_id}::{ORIGINAL}", example_id=example.example_id, kind=ORIGINAL,
        question=example.question, gold=LETTERS[gold], image=example.image, options=tuple(example.options),
        meta={"n_options": len(example.options), "canonical_gold": LETTERS[gold], "variant": None,
              "order": list(range(len(example.options))), EXAMPLE_META: example_meta(example)},
    )


def gold_moving_order(n_options: int, gold: int, rng: np.random.Generator) -> list[int]:
    """``order[j]`` = the canonical index of the option shown at position j; the gold never stays."""
    if n_options < 2:
        raise NoChoice(f"fewer than two options: the gold cannot move ({n_options} option)")
    others_positions = [position for position in range(n_options) if position != gold]
    new_gold = others_positions[int(rng.integers(len(others_positions)))]
    rest = [index for index in range(n_options) if index != gold]
    shuffled = [rest[int(i)] for i in rng.permutation(len(rest))]
    order, fill = [], iter(shuffled)
    for position in range(n_options):
        order.append(gold if position == new_gold else next(fill))
    return order


def shuffled_probe(example, seed: int, variant: int) -> Probe:
    """Variant ``variant`` of the example's option shuffle."""
    gold = canonical_gold(example)
    rng = np.random.default_rng(derive_seed(seed, example.example_id, OPTION_SHUFFLE, variant))
    order = gold_moving_order(len(example.options), gold, rng)
    new_gold = LETTERS[order.index(gold)]
    return Probe(
        probe_id=f"{example.example_id}::{OPTION_SHUFFLE}::{variant}", example_id=example.example_id,
        kind=OPTION_SHUFFLE, question=example.question, gold=new_gold, image=example.image,
        options=tuple(example.options[index] for index in order),
        meta={"n_options": len(example.options), "canonical_gold": LETTERS[gold], "variant": variant,
              "order": order, EXAMPLE_META: example_meta(example)},
    )


def collect_probes(items: Iterable, make: Callable[[Any], list[Probe]], skip_id: Callable[[Any], str]) -> ProbeSet:
    """``make(item)``'s probes for every item, in item order; an item whose probes cannot all be
    made (:class:`NoChoice`) gives none and is skipped under ``skip_id(item)`` with the reason."""
    out = ProbeSet()
    for item in items:
        try:
            made = make(item)
        except NoChoice as error:
            out.skipped.append((skip_id(item), str(error)))
            continue
        out.probes.extend(made)
    return out


def option_order_probes(examples: Iterable, seed: int, n_variants: int = 1) -> ProbeSet:
    """Per example its original probe, then its ``n_variants`` shuffles (example order kept)."""
    if n_variants < 1:
        raise ValueError(f"n_variants must be >= 1, got {n_variants}")
    return collect_probes(
        examples, lambda example: [original_probe(example)] + [shuffled_probe(example, seed, v) for v in range(n_variants)],
        lambda example: f"{example.example_id}::{OPTION_SHUFFLE}")


def text_only_probe(example, refusal: str = DEFAULT_REFUSAL) -> Probe:
    """The question and options without the image, with the refusal option appended last."""
    if not str(refusal).strip():
        raise ValueError("the refusal option's text is empty")
    gold = canonical_gold(example)
    if example.image is None:
        raise NoChoice("no image: the example is already text-only")
    if any(normalise(option) == normalise(refusal) for option in example.options):
        raise NoChoice(f"refusal clash: an option already reads {refusal!r}")
    if len(example.options) + 1 > len(LETTERS):
        raise NoChoice(f"too many options: {len(example.options)} plus the refusal exceed {len(LETTERS)} letters")
    options = (*example.options, str(refusal))
    return Probe(
        probe_id=f"{example.example_id}::{TEXT_ONLY}", example_id=example.example_id, kind=TEXT_ONLY,
        question=example.question, gold=LETTERS[gold], image=None, options=options,
        refusal=LETTERS[len(options) - 1],
        meta={"n_options": len(example.options), "canonical_gold": LETTERS[gold], "variant": None,
              "order": list(range(len(example.options))), EXAMPLE_META: example_meta(example)},
    )


def text_only_probes(examples: Iterable, refusal: str = DEFAULT_REFUSAL) -> ProbeSet:
    """Per example its ``original`` probe (the with-image arm) and its ``text_only`` probe; an
    example that cannot give both is skipped with its reason."""
    return collect_probes(examples, lambda example: [original_probe(example), text_only_probe(example, refusal)],
                          lambda example: f"{example.example_id}::{TEXT_ONLY}")
