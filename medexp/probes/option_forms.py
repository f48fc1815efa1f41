"""A multiple-choice item asked in other forms than released, each against its ``original`` probe
(:func:`medexp.probes.choice.original_probe`): the decontamination settings lmms-eval added to
its tasks (``gt_none_option``, ``number_option``, ``revert_oe_mcq``), for images.

* ``none_option``: the gold option's text removed and "None of the above" (configurable) added,
  so the right answer is now the none option. The distractors keep their canonical order; the none
  option is last, unless the gold was last, when it takes a position drawn from the others
  (``derive_seed(seed, example_id, "none_option")``): the gold's original letter then always
  shows a distractor, so "kept the letter" and "found the new answer" are different choices.
  ``meta["kept_letter"]`` is the gold's original letter;
* ``renumbered``: the options in canonical order under other labels (1, 2, 3, ... by default;
  one probe per label set, variant = the set's index); gold and choice stay positional letters
  (:class:`~medexp.probes.base.Probe` ``labels``);
* ``open_ended``: the question without its options; the gold is the gold option's text, judged
  by the cell's judge as any free-text reply. ``meta["hidden_options"]`` keeps the options.

Examples that cannot give a probe are skipped with the reason (:func:`medexp.probes.choice.collect_probes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from medexp.benchmarks.options import LETTERS, normalise
from medexp.config.wording import DEFAULT_LABEL_SETS, DEFAULT_NONE_OPTION
from medexp.kernel.hashing import derive_seed
from medexp.probes.base import Probe
from medexp.probes.choice import EXAMPLE_META, NoChoice, canonical_gold, collect_probes, example_meta, original_probe
from medexp.probes.sets import ProbeSet

NONE_OPTION = "none_option"
RENUMBERED = "renumbered"
OPEN_ENDED = "open_ended"


def none_option_probe(example, seed: int, none_text: str = DEFAULT_NONE_OPTION) -> Probe:
    """The example with its gold option's text replaced by ``none_text``, which becomes the answer."""
    if not str(none_text).strip():
        raise ValueError("the none option's text is empty")
    gold = canonical_gold(example)
    if any(normalise(option) == normalise(none_text) for option in example.options):
        raise NoChoice(f"none option clash: an option already reads {none_text!r}")
    n_options = len(example.options)
    if n_options < 2:
        raise NoChoice(f"fewer than two options: no distractor is left once the gold goes ({n_options} option)")
    distractors = [text for index, text in enumerate(example.options) if index != gold]
    position = n_options - 1
    if gold == n_options - 1:
        rng = np.random.default_rng(derive_seed(seed, example.example_id, NONE_OPTION))
        position = int(rng.integers(n_options - 1))
    options = (*distractors[:position], str(none_text), *distractors[position:])
    return Probe(
        probe_id=f"{example.example_id}::{NONE_OPTION}", example_id=example.example_id, kind=NONE_OPTION,
        question=example.question, gold=LETTERS[position], image=example.image, options=options,
        meta={"n_options": n_options, "canonical_gold": LETTERS[gold], "kept_letter": LETTERS[gold], "variant": None,
              "none_text": str(none_text), EXAMPLE_META: example_meta(example)},
    )


def none_option_probes(examples: Iterable, seed: int, none_text: str = DEFAULT_NONE_OPTION) -> ProbeSet:
    """Per example its ``original`` probe and its ``none_option`` probe."""
    return collect_probes(examples, lambda example: [original_probe(example), none_option_probe(example, seed, none_text)],
                          lambda example: f"{example.example_id}::{NONE_OPTION}")


def renumbered_probe(example, labels: Sequence[str], variant: int) -> Probe:
    """The example's options in canonical order under the first labels of ``labels``."""
    gold = canonical_gold(example)
    if len(labels) < len(example.options):
        raise NoChoice(f"too many options: {len(example.options)} exceed the {len(labels)} labels of set {variant}")
    shown = tuple(str(label) for label in labels[:len(example.options)])
    return Probe(
        probe_id=f"{example.example_id}::{RENUMBERED}::{variant}", example_id=example.example_id, kind=RENUMBERED,
        question=example.question, gold=LETTERS[gold], image=example.image, options=tuple(example.options),
        labels=shown,
        meta={"n_options": len(example.options), "canonical_gold": LETTERS[gold], "variant": variant,
              "gold_label": shown[gold], EXAMPLE_META: example_meta(example)},
    )


def renumbered_probes(examples: Iterable, label_sets: Sequence[Sequence[str]] = DEFAULT_LABEL_SETS) -> ProbeSet:
    """Per example its ``original`` probe and one ``renumbered`` probe per label set."""
    if not label_sets:
        raise ValueError("renumbered options need at least one label set")
    return collect_probes(
        examples, lambda example: [original_probe(example)] + [renumbered_probe(example, labels, variant)
                                                              for variant, labels in enumerate(label_sets)],
        lambda example: f"{example.example_id}::{RENUMBERED}")


def open_ended_probe(example) -> Probe:
    """The example's question without its options; the gold option's text is the gold answer."""
    gold = canonical_gold(example)
    return Probe(
        probe_id=f"{example.example_id}::{OPEN_ENDED}", example_id=example.example_id, kind=OPEN_ENDED,
        question=example.question, gold=example.options[gold], image=example.image,
        meta={"n_options": len(example.options), "canonical_gold": LETTERS[gold], "variant": None,
              "hidden_options": list(example.options), EXAMPLE_META: example_meta(example)},
    )


def open_ended_probes(examples: Iterable) -> ProbeSet:
    """Per example its ``original`` probe and its ``open_ended`` probe."""
    return collect_probes(examples, lambda example: [original_probe(example), open_ended_probe(example)],
                          lambda example: f"{example.example_id}::{OPEN_ENDED}")
