"""The ``demo`` benchmark: SLAKE-like VQA over synthetic scans, generated offline and deterministically.

Every record is one draw of a random process (content type, answer type, template, scan, wording),
so the released order carries no content structure. ``write_benchmark`` stores a test, a train and
a held-out split in the generic ``local`` format (``<root>/<split>.jsonl`` plus ``images/``). No
demo model trains on the held-out split: it holds the non-members of the membership detectors.
Every record also carries the forms of :mod:`medexp.demo.variants` (multiple-choice options in a
canonical order, a paraphrase, MedVIGIL's text variants, regions of interest), and the test split
has a perturbed twin, ``test_twin.jsonl``: the same ids and questions over scans with one
attribute changed so that the answer changes.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from medexp.demo.directory import build_once
from medexp.demo.scans import (
    MAX_LESIONS,
    MODALITIES,
    NUMBER_WORDS,
    ORGANS,
    SIDES,
    ScanSpec,
    answer_of,
    draw_scan,
    png_bytes,
    render_scan,
)
from medexp.demo.variants import enrich, side_stream, twin_spec

GENERATOR_VERSION = "demo-bench-v2"  # v2: options, paraphrases, text variants, regions, the test twin
IMAGE_SIZE = 96
CONTENT_TYPES: tuple[str, ...] = ("Modality", "Organ", "Abnormality", "Position", "Quantity")
FILE_KEYS: tuple[str, ...] = (
    "id", "image", "question", "answer", "options", "answer_type", "content_type", "modality", "organ", "rule",
    "paraphrase", "variants", "roi_boxes", "gold_after_lr_flip", "text_prior_free",
)
TWIN_SPLIT = "test_twin"  # the perturbed twin of the test split: same ids and questions, changed scans
TWIN_KEYS: tuple[str, ...] = (
    "id", "image", "question", "answer", "options", "answer_type", "content_type", "modality", "organ", "rule",
    "perturbation", "original_answer",
)

_CONTENT_WEIGHTS = (0.18, 0.20, 0.27, 0.15, 0.20)
_OPEN_SHARE = {"Modality": 0.6, "Organ": 0.6, "Abnormality": 0.55, "Position": 0.65, "Quantity": 0.65}
_MODALITY_WEIGHTS = (0.35, 0.30, 0.20, 0.15)
# only pairings a clinic would order, weighted so that each organ ends up near 20% overall
_ORGANS_FOR: dict[str, dict[str, float]] = {
    "CT": {"brain": 0.2, "lung": 0.25, "liver": 0.25, "kidney": 0.2, "heart": 0.1},
    "MRI": {"brain": 0.4, "liver": 0.25, "kidney": 0.2, "heart": 0.15},
    "X-Ray": {"lung": 0.7, "heart": 0.3},
    "Ultrasound": {"liver": 0.4, "kidney": 0.35, "heart": 0.25},
}
_LESION_RATE = 0.5
_COUNT_WEIGHTS = (0.5, 0.3, 0.2)

_CONTEXTS = (
    "in this follow-up study of {a} {age}-year-old",
    "for {a} {age}-year-old outpatient",
    "in {a} {age}-year-old {person}",
    "from the emergency workup of {a} {age}-year-old",
    "in this screening exam of {a} {age}-year-old {person}",
    "for {a} {age}-year-old {person} before surgery",
    "in {a} {age}-year-old {person} with recent symptoms",
    "during the routine check-up of {a} {age}-year-old",
    "for {a} {age}-year-old {person} admitted overnight",
    "in this baseline study of {a} {age}-year-old",
)
_PEOPLE = ("man", "woman", "patient")
_NEUTRAL_NOUNS = ("image", "scan", "study", "picture", "examination")
_LESION_NOUNS = (
    ("lesion", "lesions"),
    ("nodule", "nodules"),
    ("mass", "masses"),
    ("focal abnormality", "focal abnormalities"),
)

# (content type, answer type, rule) -> paraphrases. The rule decides the answer (see _answer);
# {ctx}/{Ctx} is the clinical context, {desc} names the acquisition, {img} is a neutral noun.
_TEMPLATES: dict[tuple[str, str, str], tuple[str, ...]] = {
    ("Modality", "OPEN", "modality"): (
        "What imaging modality was used for this {img} {ctx}?",
        "Which modality acquired this {organ} {img} {ctx}?",
        "By which imaging technique was this {img} of the {organ} obtained {ctx}?",
        "{Ctx}, which modality produced this {img}?",
    ),
    ("Modality", "CLOSED", "modality_is"): (
        "Was {a_cand} {cand} used to acquire this {img} {ctx}?",
        "Was this {organ} {img} acquired with {cand} {ctx}?",
        "Is {cand} the modality of this {img} {ctx}?",
        "{Ctx}, is this {img} {a_cand} {cand} examination?",
    ),
    ("Organ", "OPEN", "organ"): (
        "Which organ is shown on this {desc} {ctx}?",
        "What organ does this {desc} mainly depict {ctx}?",
        "{Ctx}, which organ was imaged on this {desc}?",
        "Name the organ visible on this {desc} {ctx}.",
    ),
    ("Organ", "CLOSED", "organ_is"): (
        "Does this {desc} {ctx} show the {cand}?",
        "Is the {cand} the organ imaged on this {desc} {ctx}?",
        "{Ctx}, is this {desc} focused on the {cand}?",
    ),
    ("Abnormality", "OPEN", "status"): (
        "{Ctx}, is the {organ} on this {desc} normal or abnormal?",
        "Does the {organ} look normal or abnormal on this {desc} {ctx}?",
    ),
    ("Abnormality", "OPEN", "finding"): (
        "What is the main finding in the {organ} on this {desc} {ctx}?",
        "{Ctx}, what does this {desc} of the {organ} show?",
    ),
    ("Abnormality", "OPEN", "lesion_organ"): (
        "Which organ contains the lesion on this {desc} {ctx}?",
        "{Ctx}, in which organ is the abnormality on this {desc}?",
    ),
    ("Abnormality", "CLOSED", "has_lesion"): (
        "Is there a lesion in the {organ} on this {desc} {ctx}?",
        "Does this {desc} of the {organ} show any abnormality {ctx}?",
        "{Ctx}, is a focal lesion visible in the {organ}?",
    ),
    ("Abnormality", "CLOSED", "is_healthy"): (
        "Does the {organ} look healthy on this {desc} {ctx}?",
        "{Ctx}, is the {organ} normal on this {desc}?",
    ),
    ("Position", "OPEN", "side"): (
        "Where {be} the {noun} located within the {organ} on this {desc} {ctx}?",
        "On which side of the {organ} {be} the {noun} {ctx}?",
        "{Ctx}, which part of the {organ} contains the {noun}?",
        "In which direction from the {organ} center {be} the {noun} {ctx}?",
    ),
    ("Position", "CLOSED", "side_is"): (
        "{Be} the {noun} on the {cand} side of the {organ} {ctx}?",
        "{Ctx}, {be} the {noun} in the {cand} part of the {organ}?",
        "{Be} the {noun} found in the {cand} portion of the {organ} {ctx}?",
    ),
    ("Quantity", "OPEN", "count"): (
        "How many {nouns} are visible in the {organ} on this {desc} {ctx}?",
        "{Ctx}, how many {nouns} can be counted in the {organ}?",
        "What is the number of {nouns} in the {organ} on this {desc} {ctx}?",
        "Count the {nouns} seen in the {organ} {ctx}.",
    ),
    ("Quantity", "CLOSED", "multiple"): (
        "Is there more than one {noun1} in the {organ} {ctx}?",
        "{Ctx}, does the {organ} contain multiple {nouns}?",
    ),
    ("Quantity", "CLOSED", "count_is"): (
        "{Be_n} there exactly {cand} {noun_n} in the {organ} on this {desc} {ctx}?",
        "{Ctx}, does the {organ} contain exactly {cand} {noun_n}?",
        "Does this {desc} {ctx} show exactly {cand} {noun_n} in the {organ}?",
    ),
}
_NEEDS_LESION = {"lesion_organ", "side", "side_is"}
_HIDES_ORGAN = {"organ", "organ_is", "lesion_organ"}


def generate_records(n: int, seed: int, split: str) -> list[dict[str, Any]]:
    """Draw ``n`` VQA records in release order; each carries its scan spec under ``"scan"`` and
    what was drawn (rule, template, slots, candidate) under ``"draw"``."""
    rng = np.random.default_rng(seed)
    return [_draw_record(rng, split, k) for k in range(n)]


def write_benchmark(
    root: Path, n_test: int = 400, n_train: int = 1200, n_heldout: int = 400, seed: int = 20261121
) -> Path:
    """Write the test, train and heldout splits, their images and a manifest into ``root``; return ``root``.

    Written atomically by :func:`medexp.demo.directory.build_once`: ``root`` either holds a
    complete benchmark or does not exist, and a complete one with the same version, seed and
    counts is returned untouched.
    """
    counts = {"test": n_test, "train": n_train, "heldout": n_heldout}
    identity = {"generator": GENERATOR_VERSION, "seed": seed, "counts": counts, "image_size": IMAGE_SIZE}
    return build_once(Path(root), identity, None, lambda tmp: _write_into(tmp, seed, counts))


def split_seeds(seed: int) -> dict[str, int]:
    """Independent sub-seeds for the test, train and heldout splits, so they share no draws.

    The held-out split came last, as the third child: ``spawn(3)`` gives the same first two
    children as ``spawn(2)`` did, so the test and train splits kept their bytes.
    """
    test, train, heldout = np.random.SeedSequence(seed).spawn(3)
    return {split: int(child.generate_state(1)[0]) for split, child in
            (("test", test), ("train", train), ("heldout", heldout))}


def _write_into(directory: Path, seed: int, counts: dict[str, int]) -> None:
    images = directory / "images"
    images.mkdir(parents=True)
    for split, sub_seed in split_seeds(seed).items():
        lines, twins = [], []
        for k, record in enumerate(generate_records(counts[split], sub_seed, split)):
            spec = ScanSpec(**record["scan"])
            image, layout = draw_scan(spec, IMAGE_SIZE)
            (directory / record["image"]).write_bytes(png_bytes(image))
            rng = side_stream(sub_seed, k)
            row = enrich(record, layout, IMAGE_SIZE, _TEMPLATES[record["draw"]["key"]], rng)
            lines.append(json.dumps({key: row[key] for key in FILE_KEYS}, ensure_ascii=False) + "\n")
            if split == "test":
                twin = _twin(directory, row, spec, rng)
                if twin is not None:
                    twins.append(json.dumps(twin, ensure_ascii=False) + "\n")
        (directory / f"{split}.jsonl").write_bytes("".join(lines).encode("utf-8"))
        if split == "test":
            (directory / f"{TWIN_SPLIT}.jsonl").write_bytes("".join(twins).encode("utf-8"))


def _twin(directory: Path, row: dict[str, Any], spec: ScanSpec, rng: np.random.Generator):
    """The perturbed twin of a test row drawn from ``spec`` (image written), or None when no
    single change of the scan gives another answer among the row's options."""
    draw = row["draw"]
    found = twin_spec(draw["rule"], spec, draw["candidate"], row["options"], rng, _ORGANS_FOR)
    if found is None:
        return None
    new, what = found
    image = f"images/{TWIN_SPLIT}_{row['id']}.png"
    (directory / image).write_bytes(png_bytes(render_scan(new, IMAGE_SIZE)))
    twin = {**row, "image": image, "answer": answer_of(draw["rule"], new, draw["candidate"]),
            "modality": new.modality, "organ": new.organ, "perturbation": what, "original_answer": row["answer"]}
    return {key: twin[key] for key in TWIN_KEYS}


def _draw_record(rng: np.random.Generator, split: str, k: int) -> dict[str, Any]:
    content = CONTENT_TYPES[_pick(rng, _CONTENT_WEIGHTS)]
    answer_type = "OPEN" if rng.random() < _OPEN_SHARE[content] else "CLOSED"
    choices = [
        (rule, text)
        for (kind, answers, rule), texts in _TEMPLATES.items()
        if (kind, answers) == (content, answer_type)
        for text in texts
    ]
    rule, template = choices[int(rng.integers(len(choices)))]
    spec = _draw_spec(rng, needs_lesion=rule in _NEEDS_LESION)
    slots, candidate = _fill_slots(rng, rule, spec)
    key = (content, answer_type, rule)
    return {
        "id": f"{k:05d}",  # the loader prefixes "<bench>::<split>::"
        "image": f"images/{split}_{k:05d}.png",
        "question": template.format(**slots),
        "answer": answer_of(rule, spec, candidate),
        "answer_type": answer_type,
        "content_type": content,
        "modality": spec.modality,
        "organ": spec.organ,
        "scan": asdict(spec),
        "draw": {"rule": rule, "key": key, "template": _TEMPLATES[key].index(template), "slots": slots,
                 "candidate": candidate},
    }


def _draw_spec(rng: np.random.Generator, needs_lesion: bool) -> ScanSpec:
    modality = MODALITIES[_pick(rng, _MODALITY_WEIGHTS)]
    organs = _ORGANS_FOR[modality]
    organ = list(organs)[_pick(rng, tuple(organs.values()))]
    lesion = needs_lesion or bool(rng.random() < _LESION_RATE)
    side = SIDES[int(rng.integers(len(SIDES)))] if lesion else None
    count = 1 + _pick(rng, _COUNT_WEIGHTS) if lesion else 0
    seed = int(rng.integers(2**31 - 1))
    return ScanSpec(modality, organ, lesion, side, count, seed)


def _fill_slots(rng: np.random.Generator, rule: str, spec: ScanSpec) -> tuple[dict[str, str], Any]:
    """Template slot values and the candidate a CLOSED question asks about (None if OPEN)."""
    age = int(rng.integers(18, 90))
    article = "an" if age in (11, 18) or 80 <= age <= 89 else "a"
    phrase = _choice(rng, _CONTEXTS)
    context = phrase.format(a=article, age=age, person=_choice(rng, _PEOPLE))
    singular, plural = _LESION_NOUNS[int(rng.integers(len(_LESION_NOUNS)))]
    noun = plural if spec.lesion_count > 1 else singular
    slots = {
        "ctx": context,
        "Ctx": context[0].upper() + context[1:],
        "organ": spec.organ,
        "img": _choice(rng, _NEUTRAL_NOUNS),
        "desc": _descriptor(rng, spec, hide_organ=rule in _HIDES_ORGAN),
        "noun": noun,
        "noun1": singular,
        "nouns": plural,
        "be": "are" if spec.lesion_count > 1 else "is",
        "Be": "Are" if spec.lesion_count > 1 else "Is",
    }
    candidate: Any = None
    if rule == "modality_is":
        candidate = _candidate(rng, spec.modality, MODALITIES)
        slots["cand"] = candidate
        slots["a_cand"] = "a" if candidate == "CT" else "an"
    elif rule == "organ_is":
        candidate = _candidate(rng, spec.organ, ORGANS)
        slots["cand"] = candidate
    elif rule == "side_is":
        candidate = _candidate(rng, spec.lesion_side, SIDES)
        slots["cand"] = candidate
    elif rule == "count_is":
        # asking "exactly zero" reads oddly, so candidates are 1..3 and a zero count is a "no"
        candidate = _candidate(rng, spec.lesion_count, tuple(range(1, MAX_LESIONS + 1)))
        slots["cand"] = NUMBER_WORDS[candidate]
        slots["noun_n"] = plural if candidate > 1 else singular
        slots["Be_n"] = "Are" if candidate > 1 else "Is"
    return slots, candidate


def _descriptor(rng: np.random.Generator, spec: ScanSpec, hide_organ: bool) -> str:
    """How the image was acquired, e.g. "axial T2-weighted MRI"; never names another organ."""
    if spec.modality == "CT":
        windows = ["soft-tissue", "bone"] + (["lung"] if spec.organ == "lung" and not hide_organ else [])
        view = _choice(rng, ("axial", "coronal", "sagittal"))
        if rng.random() < 0.3:
            return f"{_choice(rng, ('contrast-enhanced', 'non-contrast'))} {view} CT"
        return f"{view} CT with {_choice(rng, windows)} window"
    if spec.modality == "MRI":
        sequence = _choice(rng, ("T1-weighted", "T2-weighted", "FLAIR", "contrast-enhanced T1"))
        return f"{_choice(rng, ('axial', 'coronal', 'sagittal'))} {sequence} MRI"
    if spec.modality == "X-Ray":
        return f"{_choice(rng, ('PA', 'AP', 'frontal', 'portable'))} chest X-Ray"
    return f"{_choice(rng, ('transverse', 'longitudinal', 'oblique', 'bedside'))} ultrasound"


def _candidate(rng: np.random.Generator, truth: Any, options: tuple[Any, ...]) -> Any:
    """The true value half of the time (when it is an option), otherwise a wrong one."""
    if truth in options and rng.random() < 0.5:
        return truth
    wrong = [option for option in options if option != truth]
    return wrong[int(rng.integers(len(wrong)))]


def _choice(rng: np.random.Generator, options: tuple[str, ...] | list[str]) -> str:
    return options[int(rng.integers(len(options)))]


def _pick(rng: np.random.Generator, weights: tuple[float, ...]) -> int:
    """Index drawn with the given weights, by comparing one uniform draw with running sums."""
    draw = rng.random() * sum(weights)
    total = 0.0
    for index, weight in enumerate(weights):
        total += weight
        if draw < total:
            return index
    return len(weights) - 1
