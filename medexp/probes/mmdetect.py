"""The probe sets of MM-Detect's option-order and text-only detectors, made from a detector config
(slot guessing's need a translator: their recipe lives with its evaluator, medexp.evaluators.mmdetect).

``seed`` is the seed the probes are drawn from. Passing a seed that does not depend on the model
(derived from the global seed, the benchmark and the detector) gives every model the same
permutations, so their cells answer identical probes and compare directly.
"""

from __future__ import annotations

from collections.abc import Sequence

from medexp.probes.choice import option_order_probes, text_only_probes
from medexp.probes.sets import ProbeSet


def option_order_probe_set(examples: Sequence, cfg, seed: int) -> ProbeSet:
    """``original`` and ``option_shuffle`` probes (``cfg``: an option_order detector config)."""
    return option_order_probes(examples, seed, int(cfg.n_variants))


def text_only_probe_set(examples: Sequence, cfg) -> ProbeSet:
    """``original`` and ``text_only`` probes (``cfg``: a text_only detector config)."""
    return text_only_probes(examples, str(cfg.refusal_text))

