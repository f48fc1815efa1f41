"""Evaluator of ``source_naming`` (DIS-CO's question, :mod:`medexp.probes.source`): the images of
the cell's examples (audited) and of another split of its benchmark that no model saw (control,
``detector.control_split``, the cell's control applied to both), each asked which collection it
comes from; the model's answers, then the pure detector. The probes draw nothing at random: every
model of a grid answers the same ones. Also how ``python -m medexp.power`` counts its images."""

from __future__ import annotations

from collections import Counter

from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import PowerCount
from medexp.evaluators.context import CellContext
from medexp.evaluators.mmdetect import _run


def source_naming(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.source_naming import source_naming_detector

    detector = ctx.cfg.detector
    fields = list(dict.fromkeys([*detector.match_by, *detector.strata]))  # the test's strata, then the breakdown's
    return _run(ctx, source_naming_probes(ctx), source_naming_detector, fields)


def source_naming_probes(ctx: CellContext):
    """One probe per distinct image of the cell's examples and of the control split."""
    from medexp.probes.source import source_probes

    detector = ctx.cfg.detector
    control = ctx.nonmember_examples(control_split(ctx.cfg))
    return source_probes(ctx.examples, control, str(detector.question), [str(name) for name in detector.collections],
                         str(detector.audited), str(detector.control_option))


def control_split(cfg) -> str:
    """``detector.control_split``, refused when it is the audited split itself."""
    split = str(cfg.detector.control_split)
    if split == str(cfg.bench.split):
        raise ValueError(f"detector.control_split={split} is the audited split itself: name a split of images "
                         "no model saw")
    return split


def audited_and_control_images(cfg, load) -> PowerCount:
    """The distinct images of the benchmark (audited) and of the control split in the strata of
    ``detector.match_by`` holding both (the test leaves the others out), with 1/k as the control's
    naming rate a rise is measured from: a model naming one of the k ``detector.collections`` at
    random. ``load(split=None)`` loads the cell's benchmark or another split of it."""
    split = control_split(cfg)
    fields = list(cfg.detector.match_by)
    audited = _images_per_stratum(load().examples, fields)
    control = _images_per_stratum(load(split=split).examples, fields)
    shared = audited.keys() & control.keys()
    first, second = sum(audited[key] for key in shared), sum(control[key] for key in shared)
    k = len(cfg.detector.collections)
    lines = (f"audited: {first} images (split {cfg.bench.split}), control: {second} images (split {split}), "
             f"in {len(shared)} strata of {fields or 'no field'} holding both",
             f"left out (strata of one side only): {sum(audited.values()) - first} audited, "
             f"{sum(control.values()) - second} control images",
             f"control rate by default 1/{k}: a model naming one of the {k} collections at random")
    return PowerCount(n=first + second, first=first, chance=1 / k, lines=lines)


def _images_per_stratum(examples, fields) -> Counter:
    """Distinct images per stratum (the meta values of ``fields``); an image shown by several
    examples counts once, in the stratum of the first, as its probe is made."""
    stratum_of: dict[str, tuple] = {}
    for example in examples:
        if example.image is not None:
            stratum_of.setdefault(str(example.image), tuple(str(example.meta.get(name)) for name in fields))
    return Counter(stratum_of.values())
