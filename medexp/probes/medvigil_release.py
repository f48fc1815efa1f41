"""The probes a MedVIGIL release ships (``probes_mcq.csv``), as :class:`Probe` records.

Columns: probe_id (``<case_id>__<suffix>``), case_id, probe_kind, question, choice_A..choice_E,
correct_letter, expected_behavior, image_file (resolved as for the manifest: ``images_perturbed/``
under the root, anything else under ``images/``, empty for no image).

* The kind is medexp's name for the release's probe_kind (tcf -> paraphrase, halluc_trap ->
  false_premise, the others unchanged); meta keeps ``release_kind``.
* The probe id is ``<example_id>::<kind>::<suffix>`` (a case has two traps, the suffix keeps them
  apart); meta keeps ``release_probe_id`` for joining responses collected by the harness.
* Options are the choices in letter order; trailing empty choices are dropped, an empty choice
  before a filled one is an error (the letters would shift). The gold is correct_letter.
* The refusal option: the release normalises the refusal as option E in every probe (paper
  §3.1); where the probe expects a refusal (expected_behavior refuse_or_flag or
  uncertain_or_lower_confidence, or a halluc_trap / roi_masked probe, whose correct option is
  the refusal by construction) the refusal is the correct letter itself. A probe with fewer
  than five options and no expected refusal has none.
* :func:`rotated_release_probes` makes the letter-rotation arm (options permuted per probe).
* :func:`release_sweep_probes` adds the paper's visual-decay sweep and no-image ablation, which
  the release does not ship as probes: every original probe with an image re-asked blurred at
  each sigma and without its image, options and letters kept. Their release ids extend the
  original's (``MVB-0001__original__blur_8``, ``MVB-0001__original__no_image``), so a harness
  that runs the sweep can name them in its JSONL; the harness's own no-image file names the
  originals instead (``model.responses_no_image_path``, :mod:`medexp.answers.imported`).
* Probes of a skipped case (credentialed image absent, ...) are skipped with the case's reason;
  probes whose own image is absent or broken are skipped too, all counted in the
  :class:`ProbeSet`. A case id that the manifest does not list is an error.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from medexp.benchmarks.base import Benchmark
from medexp.benchmarks.images import image_problem
from medexp.benchmarks.options import LETTERS
from medexp.benchmarks.records import check_inside
from medexp.benchmarks.medvigil import (
    MANIFEST,
    MANIFEST_COLUMNS,
    PROBES,
    read_csv,
    resolve_image,
)
from medexp.probes.base import RELEASE_ID_KEY, SOURCE_RELEASE_ID_KEY, Probe
from medexp.probes.options import OptionSet, letter_rng, rotate_options
from medexp.probes.sets import ProbeSet

RELEASE_KINDS = {
    "original": "original",
    "tcf": "paraphrase",
    "negation": "negation",
    "specificity_drop": "specificity_drop",
    "knowledge_only": "knowledge_only",
    "halluc_trap": "false_premise",
    "lr_flip": "lr_flip",
    "roi_only": "roi_only",
    "roi_masked": "roi_masked",
}
REFUSAL_BEHAVIOURS = frozenset({"refuse_or_flag", "uncertain_or_lower_confidence"})
REFUSAL_KINDS = frozenset({"halluc_trap", "roi_masked"})
REFUSAL_LETTER = "E"  # the release's place for the refusal option
CHOICE_COLUMNS = tuple(f"choice_{letter}" for letter in "ABCDE")
PROBE_COLUMNS = ("probe_id", "case_id", "probe_kind", "question", *CHOICE_COLUMNS, "correct_letter",
                 "expected_behavior", "image_file")


def read_release_probes(benchmark: Benchmark, root: Path, allow_outside_root: bool = False) -> ProbeSet:
    """The release's probes for the cases of ``benchmark`` (loaded with format medvigil), in file
    order. Every ``image_file`` must resolve inside ``root`` (symlinks included) unless
    ``allow_outside_root``: a probe file naming ``../`` or an absolute path is refused with its line."""
    root = Path(root)
    loaded = {example.meta.get("case_id"): example for example in benchmark.examples}
    skipped_cases = {skip.example_id.rsplit("::", 1)[-1]: skip.reason for skip in benchmark.skipped if skip.example_id}
    listed = {row["case_id"].strip() for _, row in read_csv(root / MANIFEST, MANIFEST_COLUMNS)}
    path = root / PROBES
    if not path.is_file():
        raise FileNotFoundError(f"MedVIGIL copy at {root} has no {PROBES}")
    result = ProbeSet()
    problems: dict[Path, str | None] = {}
    seen: set[str] = set()
    for where, row in read_csv(path, PROBE_COLUMNS):
        release_id, case_id = row["probe_id"].strip(), row["case_id"].strip()
        if release_id in seen:
            raise ValueError(f"{where}: duplicate probe_id {release_id!r}")
        seen.add(release_id)
        if case_id not in listed:
            raise ValueError(f"{where}: probe {release_id!r} names case_id {case_id!r}, which {MANIFEST} does not list")
        if not release_id.startswith(f"{case_id}__") or release_id == f"{case_id}__":
            raise ValueError(f"{where}: probe_id {release_id!r} is not '<case_id>__<suffix>' for case {case_id!r}")
        release_kind = row["probe_kind"].strip()
        if release_kind not in RELEASE_KINDS:
            raise ValueError(f"{where}: unknown probe_kind {release_kind!r}; known: {sorted(RELEASE_KINDS)}")
        kind = RELEASE_KINDS[release_kind]
        example = loaded.get(case_id)
        if example is None:
            reason = skipped_cases.get(case_id, "case not loaded: beyond bench.max_examples")
            result.skipped.append((release_id, f"{reason.split(':', 1)[0]}: case {case_id} skipped ({reason})"))
            continue
        image = resolve_image(root, row["image_file"])
        if image is not None:
            if not allow_outside_root:
                check_inside(root, image, where)
            if image not in problems:
                problems[image] = image_problem(image)
            if problems[image]:
                result.skipped.append((release_id, problems[image]))
                continue
        result.probes.append(_probe(row, where, example, kind, release_kind, release_id, image))
    return result


def release_probe_index(probes: list[Probe]) -> dict[str, Probe]:
    """release probe_id -> probe, for joining the harness's JSONL responses to these probes."""
    return {probe.meta[RELEASE_ID_KEY]: probe for probe in probes if RELEASE_ID_KEY in probe.meta}


def rotated_release_probes(probes: list[Probe], seed: int) -> list[Probe]:
    """The letter-rotation arm of the release's probes: each probe's options, refusal included,
    permuted as the evidence probes are (:func:`~medexp.probes.options.rotate_options`, a stream
    per probe from ``seed`` and the probe id), so the gold is no longer always A (or E)."""
    out = []
    for probe in probes:
        rotated = rotate_options(OptionSet(probe.options, probe.gold, probe.refusal), letter_rng(seed, probe.probe_id))
        out.append(replace(probe, options=rotated.options, gold=rotated.gold, refusal=rotated.refusal,
                           meta={**probe.meta, "rotated": True}))
    return out


def release_sweep_probes(probes: list[Probe], store: Path, sigmas, no_image: bool) -> list[Probe]:
    """The blur sweep (``sigmas``) and, with ``no_image``, the no-image ablation of every
    original probe with an image, in probe order (see the module docstring)."""
    from medexp.probes.evidence import sweep_probes

    out = []
    for probe in probes:
        if probe.kind != "original" or probe.image is None:
            continue
        for variant in sweep_probes(probe, store, sigmas, no_image):
            source = probe.meta[RELEASE_ID_KEY]
            out.append(replace(variant, meta={**variant.meta, RELEASE_ID_KEY: f"{source}__{variant.kind}",
                                              SOURCE_RELEASE_ID_KEY: source}))
    return out


def _probe(row: dict[str, str], where: str, example, kind: str, release_kind: str, release_id: str, image) -> Probe:
    options = _options(row, where)
    gold = row["correct_letter"].strip().upper()
    if gold not in LETTERS[:len(options)]:
        raise ValueError(f"{where}: correct_letter {row['correct_letter']!r} is not a letter of the "
                         f"{len(options)} option(s) {list(LETTERS[:len(options)])}")
    behaviour = row["expected_behavior"].strip()
    expects_refusal = behaviour.lower() in REFUSAL_BEHAVIOURS or release_kind in REFUSAL_KINDS
    if expects_refusal:
        refusal = gold
    else:
        refusal = REFUSAL_LETTER if len(options) > LETTERS.index(REFUSAL_LETTER) else None
    suffix = release_id[len(row["case_id"].strip()) + 2:]
    meta = {key: example.meta[key] for key in ("case_id", "source_dataset", "modality", "risk_tier",
                                               "text_only_answerable")}
    return Probe(
        probe_id=f"{example.example_id}::{kind}::{suffix}",
        example_id=example.example_id,
        kind=kind,
        question=row["question"],
        gold=gold,
        image=image,
        options=options,
        refusal=refusal,
        meta={**meta, RELEASE_ID_KEY: release_id, "release_kind": release_kind,
              "expected_behavior": behaviour, "expects_refusal": expects_refusal, "rotated": False},
    )


def _options(row: dict[str, str], where: str) -> tuple[str, ...]:
    choices = [row[column].strip() for column in CHOICE_COLUMNS]
    while choices and not choices[-1]:
        choices.pop()
    if not choices:
        raise ValueError(f"{where}: the probe has no choices (choice_A..choice_E all empty)")
    gaps = [LETTERS[index] for index, text in enumerate(choices) if not text]
    if gaps:
        raise ValueError(f"{where}: empty choice(s) {gaps} before a filled one: the letters would shift")
    return tuple(choices)
