"""Every other form of a demo record, with the gold the generator knows exactly.

The demo generator draws a record (a rule, a template, slot values, a scan); from that draw this
module derives, without touching the draw's random stream (a side stream per record):

* ``options``: a multiple-choice form, the gold plus up to three distractors of the same answer
  family (modalities, organs, sides, counts, yes/no ...) in a canonical order fixed in the release;
* ``paraphrase``: the same question in another of the rule's templates, same slot values, same
  answer (what ``translator=demo`` returns, and MedVIGIL's T-CF paraphrase);
* ``variants``: MedVIGIL's text families with their golds: ``negation`` (binary rules: the
  question inverted and the gold flipped), ``specificity_drop`` (the clinical context and the
  acquisition descriptor removed, gold kept), ``knowledge_only`` (a fact about the case's organ or
  modality, answerable without the image) and ``false_premise`` (a question that presupposes a
  lesion the image does not show, or an organ it does not show: the gold is the refusal);
* ``roi_boxes``: where the evidence lies (the lesions, else the organ; the whole frame for
  modality questions), in the shape of :mod:`medexp.benchmarks.roi`;
* ``gold_after_lr_flip`` for questions about a side, and ``text_prior_free``: the answer is
  uniformly distributed over its options whatever the question's text says (the text-only
  probe's chance rate is then exact);
* :func:`twin_record`: the perturbed twin of a test record (the same question, the scan drawn
  again with one attribute changed so that the answer changes), for paired semantic perturbation.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np

from medexp.demo.scans import MAX_LESIONS, MODALITIES, ORGANS, SIDES, ScanLayout, ScanSpec, answer_of

YES_NO = ("yes", "no")
COUNT_WORDS = ("zero", "one", "two", "three")
N_OPTIONS = 4
FAMILIES: dict[str, tuple[str, ...]] = {
    "modality": MODALITIES,
    "organ": ORGANS,
    "lesion_organ": ORGANS,
    "status": ("normal", "abnormal"),
    "finding": ("focal lesion", "no abnormality"),
    "side": SIDES,
    "count": COUNT_WORDS,
}
MODALITY_RULES = {"modality", "modality_is"}
LESION_RULES = {"status", "finding", "lesion_organ", "has_lesion", "is_healthy", "side", "side_is", "count",
                "count_is", "multiple"}
# Rules whose answer is uniformly distributed over its options given the question text: the side
# is drawn uniformly, a lesion half the time, and a candidate side is the true one half the time.
TEXT_PRIOR_FREE = {"side", "side_is", "has_lesion", "is_healthy", "status", "finding"}

_NEGATIONS = {
    "has_lesion": "Is the {organ} free of lesions on this {desc} {ctx}?",
    "is_healthy": "Does the {organ} look diseased on this {desc} {ctx}?",
    "status": "Which word does not describe the {organ} on this {desc} {ctx}, normal or abnormal?",
    "finding": "Which of these is not what this {desc} of the {organ} shows {ctx}?",
    "modality_is": "Was this {img} acquired with a modality other than {cand} {ctx}?",
    "organ_is": "Does this {desc} {ctx} show an organ other than the {cand}?",
    "side_is": "{Be} the {noun} away from the {cand} side of the {organ} {ctx}?",
    "count_is": "Does the {organ} contain a number of {nouns} other than {cand} {ctx}?",
    "multiple": "Is there at most one {noun1} in the {organ} {ctx}?",
}
_FLIPPED = {"yes": "no", "no": "yes", "normal": "abnormal", "abnormal": "normal",
            "focal lesion": "no abnormality", "no abnormality": "focal lesion"}
_SPECIFICITY_DROPS = {
    "modality": "Which imaging modality was used?",
    "modality_is": "Was {a_cand} {cand} used?",
    "organ": "Which organ is shown?",
    "organ_is": "Is the {cand} shown?",
    "status": "Is the {organ} normal or abnormal?",
    "finding": "What is the main finding in the {organ}?",
    "lesion_organ": "Which organ contains the lesion?",
    "has_lesion": "Is there a lesion in the {organ}?",
    "is_healthy": "Does the {organ} look healthy?",
    "side": "Where {be} the {noun} located?",
    "side_is": "{Be} the {noun} on the {cand} side?",
    "count": "How many {nouns} are visible?",
    "count_is": "{Be_n} there exactly {cand} {noun_n}?",
    "multiple": "Is there more than one {noun1}?",
}
ORGAN_FACTS = {
    "brain": "Which organ holds the cerebral cortex?",
    "lung": "Which organ exchanges oxygen and carbon dioxide with the blood?",
    "liver": "Which organ produces bile?",
    "kidney": "Which organ filters the blood to make urine?",
    "heart": "Which organ pumps blood around the body?",
}
MODALITY_FACTS = {
    "CT": "Which imaging modality reconstructs cross-sectional slices from many X-ray projections?",
    "MRI": "Which imaging modality uses a strong magnetic field and radio waves?",
    "X-Ray": "Which imaging modality records a single projection of X-rays through the body?",
    "Ultrasound": "Which imaging modality uses high-frequency sound waves?",
}
_MIRROR = {"left": "right", "right": "left", "upper": "upper", "lower": "lower"}


def side_stream(split_seed: int, k: int) -> np.random.Generator:
    """The record's own stream for everything derived here: the main draw is never disturbed."""
    return np.random.default_rng((split_seed, k, 7))


def family(rule: str) -> tuple[str, ...]:
    return FAMILIES.get(rule, YES_NO)


def choice_options(answers: tuple[str, ...], gold: str, rng: np.random.Generator) -> list[str]:
    """The gold and up to ``N_OPTIONS - 1`` other answers of its family, in a seeded order."""
    others = [answer for answer in answers if answer != gold]
    picked = [others[i] for i in rng.permutation(len(others))[: N_OPTIONS - 1]]
    options = [gold, *picked]
    return [options[i] for i in rng.permutation(len(options))]


def enrich(record: dict[str, Any], layout: ScanLayout, image_size: int, templates: tuple[str, ...],
           rng: np.random.Generator) -> dict[str, Any]:
    """The record (with its ``draw``) with its options, paraphrase, text variants, regions and
    flags added."""
    from medexp.benchmarks.roi import roi_entry

    draw = record["draw"]
    rule, slots, spec = draw["rule"], draw["slots"], ScanSpec(**record["scan"])
    options = choice_options(family(rule), record["answer"], rng)
    others = [index for index in range(len(templates)) if index != draw["template"]]
    paraphrase = templates[others[int(rng.integers(len(others)))]].format(**slots)
    variants: dict[str, Any] = {
        "specificity_drop": {"question": _SPECIFICITY_DROPS[rule].format(**slots), "answer": record["answer"],
                             "options": options},
    }
    if rule in _NEGATIONS:
        variants["negation"] = {"question": _NEGATIONS[rule].format(**slots), "answer": _FLIPPED[record["answer"]],
                                "options": options}
    topic, facts, answers = ((spec.modality, MODALITY_FACTS, MODALITIES) if rule in MODALITY_RULES
                             else (spec.organ, ORGAN_FACTS, ORGANS))
    variants["knowledge_only"] = {"question": facts[topic], "answer": topic,
                                  "options": choice_options(answers, topic, rng)}
    variants["false_premise"] = {"question": _false_premise(spec, slots, rng), "answer": None,
                                 "options": choice_options(SIDES, SIDES[0], rng)}
    boxes = [roi_entry("lesion", box, (image_size, image_size)) for box in layout.lesion_boxes]
    if rule in MODALITY_RULES:
        boxes = [roi_entry("frame", (0, 0, image_size, image_size), (image_size, image_size))]
    elif rule not in LESION_RULES or not boxes:
        boxes = [roi_entry(spec.organ, layout.organ_box, (image_size, image_size))]
    return {
        **record,
        "options": options,
        "paraphrase": paraphrase,
        "variants": variants,
        "roi_boxes": boxes,
        "gold_after_lr_flip": _after_flip(rule, spec, draw["candidate"]),
        "text_prior_free": rule in TEXT_PRIOR_FREE,
        "rule": rule,
    }


def _false_premise(spec: ScanSpec, slots: dict[str, str], rng: np.random.Generator) -> str:
    """A question whose premise the image contradicts: a lesion that is not there, or one in an
    organ the scan does not show."""
    if not spec.lesion:
        return "On which side of the {organ} is the lesion on this {desc} {ctx}?".format(**slots)
    absent = [organ for organ in ORGANS if organ != spec.organ]
    other = absent[int(rng.integers(len(absent)))]
    return f"On which side of the {other} is the lesion on this {slots['img']} {slots['ctx']}?"


def _after_flip(rule: str, spec: ScanSpec, candidate: Any) -> str | None:
    """The gold once the image is mirrored left-right, for questions about a side."""
    if rule == "side":
        return _MIRROR[str(spec.lesion_side)]
    if rule == "side_is":
        return "yes" if candidate == _MIRROR[str(spec.lesion_side)] else "no"
    return None


# ---------------------------------------------------------------------------- perturbed twins


def twin_spec(rule: str, spec: ScanSpec, candidate: Any, options: list[str],
              rng: np.random.Generator, organs_for: dict[str, Any]) -> tuple[ScanSpec, str] | None:
    """A scan that differs from ``spec`` in one attribute so that the rule's answer changes to
    another of ``options``, and what changed; None when no such scan exists."""
    moves: dict[str, Callable[[], list[tuple[ScanSpec, str]]]] = {
        "modality": lambda: [(replace(spec, modality=m), f"modality {spec.modality} -> {m}")
                             for m in MODALITIES if m != spec.modality and spec.organ in organs_for[m]],
        "organ": lambda: _organ_moves(spec, organs_for),
        "lesion_organ": lambda: _organ_moves(spec, organs_for),
        "side": lambda: [(_with_lesion(spec, s, spec.lesion_count), f"lesion {spec.lesion_side} -> {s}")
                         for s in SIDES if s != spec.lesion_side],
        "count": lambda: [(_with_count(spec, n, rng), f"lesion count {spec.lesion_count} -> {n}")
                          for n in range(MAX_LESIONS + 1) if n != spec.lesion_count],
    }
    for presence in ("status", "finding", "has_lesion", "is_healthy"):
        moves[presence] = lambda: [(_toggled(spec, rng), "lesion removed" if spec.lesion else "lesion added")]
    moves["multiple"] = lambda: [(_with_count(spec, 1 if spec.lesion_count > 1 else 2, rng),
                                  f"lesion count {spec.lesion_count} -> {1 if spec.lesion_count > 1 else 2}")]
    moves["side_is"] = lambda: [(_with_lesion(spec, s, spec.lesion_count), f"lesion {spec.lesion_side} -> {s}")
                                for s in SIDES if s != spec.lesion_side and (s == candidate) != (spec.lesion_side == candidate)]
    moves["count_is"] = lambda: [(_with_count(spec, n, rng), f"lesion count {spec.lesion_count} -> {n}")
                                 for n in range(MAX_LESIONS + 1)
                                 if n != spec.lesion_count and (n == candidate) != (spec.lesion_count == candidate)]
    moves["modality_is"] = lambda: [(replace(spec, modality=m), f"modality {spec.modality} -> {m}")
                                    for m in MODALITIES if m != spec.modality and spec.organ in organs_for[m]
                                    and (m == candidate) != (spec.modality == candidate)]
    moves["organ_is"] = lambda: [(spec_, why) for spec_, why in _organ_moves(spec, organs_for)
                                 if (spec_.organ == candidate) != (spec.organ == candidate)]
    candidates = moves[rule]()
    usable = [(new, why) for new, why in candidates if answer_of(rule, new, candidate) in options]
    if not usable:
        return None
    return usable[int(rng.integers(len(usable)))]


def _organ_moves(spec: ScanSpec, organs_for: dict[str, Any]) -> list[tuple[ScanSpec, str]]:
    return [(replace(spec, organ=o), f"organ {spec.organ} -> {o}")
            for o in organs_for[spec.modality] if o != spec.organ]


def _with_lesion(spec: ScanSpec, side: str, count: int) -> ScanSpec:
    return replace(spec, lesion=True, lesion_side=side, lesion_count=count)


def _with_count(spec: ScanSpec, count: int, rng: np.random.Generator) -> ScanSpec:
    if count == 0:
        return replace(spec, lesion=False, lesion_side=None, lesion_count=0)
    side = spec.lesion_side or SIDES[int(rng.integers(len(SIDES)))]
    return _with_lesion(spec, side, count)


def _toggled(spec: ScanSpec, rng: np.random.Generator) -> ScanSpec:
    return _with_count(spec, 0 if spec.lesion else 1, rng)
