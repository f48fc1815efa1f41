"""Evidence probes made from a benchmark example (MedVIGIL's image-side families and blur sweep).

From one :class:`~medexp.benchmarks.base.Example`, keeping its question:

* ``original``: the image as released, gold = the example's answer;
* ``roi_masked``: the regions of interest filled with grey; the evidence is gone, so the gold is
  the refusal option ("the region needed to answer is not visible");
* ``roi_only``: only the regions kept on a grey canvas; gold = the answer;
* ``lr_flip``: the image mirrored; when the gold names a side (left/right) it is swapped, a
  ``meta["gold_after_lr_flip"]`` given by the benchmark wins, and a question about a side whose
  gold does not name one (a yes/no about "the left lung") is skipped unless that field is set;
* ``blur_<sigma>`` for sigma in the sweep (``blur_0`` is the original image), and ``no_image``
  (the same question without any image); gold = the answer, as in MedVIGIL's decay sweep and
  no-image ablation. :func:`sweep_probes` makes these two families from an existing probe (a
  release's original probe), keeping its options;
* the text families (:data:`~medexp.config.wording.TEXT_KINDS`), the image kept and the question
  taken from the example's own variants: ``meta["paraphrase"]`` (a rewording, gold kept) and
  ``meta["variants"][kind]`` = ``{"question", "answer", "options"}`` for ``negation``,
  ``specificity_drop``, ``knowledge_only`` and ``false_premise`` (``answer`` null: the refusal is
  the gold; ``options`` optional: else the example's answer options). The demo generator writes
  all five with known golds; any ``local`` benchmark may carry them.

Every probe is a five-option question (:mod:`medexp.probes.options`): the answer options of the
example (its own options, else the gold plus distractors drawn from ``pool``) and a refusal option
worded for the kind. The same answer options serve all the probes of an example. Letters are
fixed (the release's convention) or rotated by a permutation seeded from the cell seed and the
probe id, so a probe's letters do not depend on which other examples are probed.

Probes that cannot be made (no image, no region, undetermined laterality) are returned as skips
with their reason, never silently dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from medexp.benchmarks.options import normalise
from medexp.benchmarks.roi import roi_boxes, select_boxes
from medexp.kernel.hashing import derive_seed
from medexp.probes.base import Probe
from medexp.probes.images import (
    blur,
    keep_regions,
    mask_regions,
    mirror,
    pixel_boxes,
    store_derived,
)
from medexp.probes.options import (
    N_ANSWERS,
    answer_choices,
    letter_rng,
    refusal_text,
    wrap_options,
)
from medexp.config.tiers import check_tier, risk_tier
from medexp.config.wording import BLUR_SIGMAS, EVIDENCE_KINDS, TEXT_KINDS, check_evidence_battery
from medexp.probes.sets import ProbeSet

NO_IMAGE = "no_image"
GOLD_AFTER_FLIP = "gold_after_lr_flip"
_SIDE = re.compile(r"\b(left|right)\b", re.IGNORECASE)
_SWAP = {"left": "right", "right": "left"}


@dataclass(frozen=True)
class EvidenceSettings:
    """How the probes of a cell are made.

    ``store`` is the folder derived images are written to (content-addressed); ``tiers`` maps
    meta fields to risk tiers (None: use the example's own ``risk_tier`` meta field, if any);
    ``roi_labels`` restricts the regions to those labels (None: every box of the example).
    """

    seed: int
    store: Path
    rotate: bool = False
    kinds: tuple[str, ...] = EVIDENCE_KINDS
    sigmas: tuple[int, ...] = BLUR_SIGMAS
    n_answers: int = N_ANSWERS
    tiers: Optional[Mapping[str, Mapping[str, Any]]] = None
    roi_labels: Optional[tuple[str, ...]] = None

    def __post_init__(self) -> None:
        check_evidence_battery(self.kinds, self.sigmas)


class LateralityUndetermined(ValueError):
    """A question about a side whose flipped gold cannot be derived from the gold's text."""


def mentions_side(text: str) -> bool:
    return bool(_SIDE.search(str(text)))


def swap_sides(text: str) -> str:
    """``text`` with left and right exchanged as whole words, keeping each word's capitalisation."""
    def swap(match: re.Match) -> str:
        word = match.group(0)
        other = _SWAP[word.lower()]
        return other.upper() if word.isupper() else other.capitalize() if word[0].isupper() else other

    return _SIDE.sub(swap, str(text))


def flipped_gold(question: str, gold: str, gold_after_flip: Optional[str] = None) -> tuple[str, bool]:
    """The gold after a left-right mirror and whether it depends on laterality."""
    if gold_after_flip is not None and str(gold_after_flip).strip():
        return str(gold_after_flip), normalise(gold_after_flip) != normalise(gold)
    if mentions_side(gold):
        return swap_sides(gold), True
    if mentions_side(question):
        raise LateralityUndetermined(
            f"the question names a side but the gold {gold!r} does not; set meta[{GOLD_AFTER_FLIP!r}]")
    return str(gold), False


def evidence_probes(examples: Iterable, pool: Sequence[str], settings: EvidenceSettings) -> ProbeSet:
    """The evidence probes of every example, in example order then kind order."""
    from tqdm.auto import tqdm

    result = ProbeSet()
    for example in tqdm(list(examples), desc="evidence probes", unit="example", disable=None, leave=False):
        result.extend(example_probes(example, pool, settings))
    return result


def example_probes(example, pool: Sequence[str], settings: EvidenceSettings) -> ProbeSet:
    """The probes ``settings.kinds`` asks for, made from one example."""
    from medexp.benchmarks.images import read_image

    out = ProbeSet()
    meta = _probe_meta(example, settings)
    try:
        gold_flipped = flipped_gold(example.question, example.answer, example.meta.get(GOLD_AFTER_FLIP))
    except LateralityUndetermined as error:
        gold_flipped = error
    answers = _answers(example, pool, settings, gold_flipped)
    image = read_image(example.image, "RGB") if example.image is not None else None
    boxes = select_boxes(roi_boxes(example.meta, example.example_id), settings.roi_labels)

    def add(kind: str, gold_text: Optional[str], image_path: Optional[Path], question: Optional[str] = None,
            choices: Sequence[str] = answers, **extra: Any) -> None:
        probe_id = f"{example.example_id}::{kind}"
        rng = letter_rng(settings.seed, probe_id) if settings.rotate else None
        wrapped = wrap_options(choices, refusal_text(kind), gold_text, rng)
        out.probes.append(Probe(
            probe_id=probe_id, example_id=example.example_id, kind=kind, question=question or example.question,
            gold=wrapped.gold, image=image_path, options=wrapped.options, refusal=wrapped.refusal,
            meta={**meta, "expects_refusal": gold_text is None, **extra},
        ))

    def derived(kind: str, transformed) -> Path:
        return store_derived(transformed, settings.store, f"{example.example_id}::{kind}")

    for kind in settings.kinds:
        if kind == "original":
            add("original", example.answer, example.image)
        elif kind == "no_image":
            add("no_image", example.answer, None)
        elif kind in TEXT_KINDS:
            variant = text_variant(example, kind, answers)
            if isinstance(variant, str):
                out.skipped.append((f"{example.example_id}::{kind}", variant))
                continue
            question, gold_text, choices = variant
            add(kind, gold_text, example.image, question=question, choices=choices)
        elif image is None:
            for name in _names(kind, settings):
                out.skipped.append((f"{example.example_id}::{name}", "no image: the example is text-only"))
        elif kind in ("roi_masked", "roi_only"):
            if not boxes:
                out.skipped.append((f"{example.example_id}::{kind}", "no region: the example has no roi_boxes"
                                    + (f" labelled {list(settings.roi_labels)}" if settings.roi_labels else "")))
                continue
            regions = pixel_boxes(image, [box.box_norm for box in boxes])
            if kind == "roi_masked":
                add(kind, None, derived(kind, mask_regions(image, regions)), roi_labels=[box.label for box in boxes])
            else:
                add(kind, example.answer, derived(kind, keep_regions(image, regions)),
                    roi_labels=[box.label for box in boxes])
        elif kind == "lr_flip":
            if isinstance(gold_flipped, LateralityUndetermined):
                out.skipped.append((f"{example.example_id}::lr_flip", f"undetermined laterality: {gold_flipped}"))
                continue
            gold_text, dependent = gold_flipped
            add("lr_flip", gold_text, derived("lr_flip", mirror(image)), laterality_dependent=dependent)
        elif kind == "blur":
            for sigma in settings.sigmas:
                path = example.image if sigma == 0 else derived(f"blur_{sigma}", blur(image, sigma))
                add(f"blur_{sigma}", example.answer, path, sigma=sigma)
    return out


def text_variant(example, kind: str, answers: Sequence[str]) -> tuple[str, Optional[str], tuple[str, ...]] | str:
    """(question, gold text or None for the refusal, answer options) of a text-family probe, or
    the reason the example has none."""
    if kind == "paraphrase":
        text = example.meta.get("paraphrase")
        if not isinstance(text, str) or not text.strip():
            return "no paraphrase: the example's meta has no paraphrase"
        return text, example.answer, tuple(answers)
    variant = (example.meta.get("variants") or {}).get(kind)
    if not isinstance(variant, Mapping) or not str(variant.get("question") or "").strip():
        return f"no {kind} variant: the example's meta variants have none"
    gold = variant.get("answer")
    choices = tuple(str(option) for option in variant.get("options") or answers)
    if gold is not None and normalise(gold) not in {normalise(option) for option in choices}:
        raise ValueError(f"{example.example_id}: the {kind} variant's answer {gold!r} is not among its options "
                         f"{list(choices)}")
    return str(variant["question"]), None if gold is None else str(gold), choices


def sweep_probes(probe: Probe, store: Path, sigmas: Sequence[int] = BLUR_SIGMAS, no_image: bool = True) -> list[Probe]:
    """Blur and no-image variants of an existing probe (a release's original probe), options kept.

    MedVIGIL's decay sweep and no-image ablation re-ask the original probes as released, so the
    variants keep the probe's question, options, gold and refusal, and change only the image:
    ``blur_<sigma>`` for each of ``sigmas`` (sigma 0 keeps the image file) and, with
    ``no_image``, ``no_image``. Ids are the probe's with the kind replaced
    (``<example_id>::blur_8`` plus the probe's variant suffix, if any).
    """
    from medexp.benchmarks.images import read_image

    if probe.image is None:
        raise ValueError(f"{probe.probe_id}: a probe without image has no blur sweep")
    suffix = probe.probe_id[len(f"{probe.example_id}::{probe.kind}"):]
    image = read_image(probe.image, "RGB") if any(sigmas) else None
    out = []
    for sigma in sigmas:
        kind = f"blur_{sigma}"
        path = probe.image if sigma == 0 else store_derived(blur(image, sigma), store, f"{probe.probe_id}::{kind}")
        out.append(replace(probe, probe_id=f"{probe.example_id}::{kind}{suffix}", kind=kind, image=path,
                           meta={**probe.meta, "sigma": sigma, "source_probe_id": probe.probe_id}))
    if no_image:
        out.append(replace(probe, probe_id=f"{probe.example_id}::{NO_IMAGE}{suffix}", kind=NO_IMAGE, image=None,
                           meta={**probe.meta, "source_probe_id": probe.probe_id}))
    return out


def is_ablation(kind: str) -> bool:
    """Whether a probe kind belongs to the blur sweep or the no-image ablation."""
    return kind == NO_IMAGE or kind.startswith("blur_")


def _names(kind: str, settings: EvidenceSettings) -> list[str]:
    return [f"blur_{sigma}" for sigma in settings.sigmas] if kind == "blur" else [kind]


def _answers(example, pool: Sequence[str], settings: EvidenceSettings, gold_flipped) -> tuple[str, ...]:
    """The example's answer options (gold first), shared by all its probes."""
    rng = np.random.default_rng(derive_seed(settings.seed, example.example_id, "answers"))
    required = ()
    if not isinstance(gold_flipped, LateralityUndetermined) and gold_flipped[1]:
        required = (gold_flipped[0],)  # the flipped gold must be an option of the lr_flip probe
    source = example.options if example.options else pool
    return answer_choices(example.answer, source, rng, settings.n_answers, required)


def _probe_meta(example, settings: EvidenceSettings) -> dict[str, Any]:
    if settings.tiers is not None:
        tier = risk_tier(example.meta, settings.tiers, example.example_id)
    elif example.meta.get("risk_tier") is not None:
        tier = check_tier(example.meta["risk_tier"], example.example_id)
    else:
        tier = None
    return {
        "risk_tier": tier,
        "text_only_answerable": example.meta.get("text_only_answerable"),
        "rotated": settings.rotate,
    }
