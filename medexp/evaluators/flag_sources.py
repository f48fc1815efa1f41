"""Flag sources of the overlap gaps: which examples an overlap test flagged, read or computed where
the detector's ``flags:`` section says (conf/flags/), as one table whose content hash joins the
cell's inputs (:func:`medexp.runner.inputs.load_inputs`), so a cell whose flags change is computed
again, never reused (DESIGN.md, "Chains of evidence").

Kinds (:class:`medexp.config.schemas.FlagSourceKind`):

- ``column``: a flag field of a record of scores (the controlled audit's ``flagged``), of the
  cell's model or of the record ``flags.model`` names;
- ``split_overlap``: the release's own split overlap from its annotations alone: an example is
  flagged when its image, as the meta field ``detector.image_field`` names it (SLAKE ``img_name``,
  VQA-RAD ``image_name``; else its image path), is also an image of one of ``flags.splits`` (every
  row of them, whatever the language filter). Exact, and no pixel is read;
- ``image_nn``: the flags an image_nn cell with the config ``flags.image_nn`` gives (exact copies
  and near-duplicates below its calibrated tau), through the same code, embedding cache and seed.

A source judges the examples it can: an example absent from a record, without an image name or
without an image has no row (``flags_n_unjudged``) and stays out of the gap. A source that cannot
be read or computed refuses the cell with an error naming it.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from medexp.benchmarks.base import Benchmark, Example
from medexp.config.schemas import FlagSourceKind
from medexp.kernel.hashing import stable_hash

FLAG_COLUMNS = ("example_id", "image", "flagged")

log = logging.getLogger(__name__)


class FlagSourceError(ValueError):
    """A flag source that cannot be read or computed; the message names it."""


@dataclass(frozen=True)
class FlagTable:
    """One row per example the source judged (``FLAG_COLUMNS``, released order), and what it reported."""

    source: str
    table: pd.DataFrame
    n_unjudged: int  # examples of the benchmark the source has no verdict on
    details: dict[str, float] = field(default_factory=dict)  # source-specific metrics (flags_<name>)
    warnings: tuple[str, ...] = ()

    @property
    def content_hash(self) -> str:
        """The hash of the flags themselves (example id and flag, in id order): what a cell's inputs hash holds."""
        rows = sorted(zip(self.table["example_id"], self.table["flagged"].astype(bool).tolist()))
        return stable_hash(rows, length=32)

    def flags(self) -> pd.DataFrame:
        """``example_id`` and ``flagged`` (bool)."""
        return self.table[["example_id", "flagged"]].astype({"flagged": bool})

    def metrics(self) -> dict[str, float]:
        """How many questions and images the source judged and flagged (an example without an image
        name is an image of its own), and its own details."""
        flagged = self.table["flagged"].astype(bool).to_numpy()
        images = _image_keys(self.table["image"])
        return {
            "flags_n_questions": float(len(self.table)),
            "flags_n_questions_flagged": float(flagged.sum()),
            "flags_n_images": float(len(set(images))),
            "flags_n_images_flagged": float(len({image for image, flag in zip(images, flagged) if flag})),
            "flags_n_unjudged": float(self.n_unjudged),
            **self.details,
        }


def _image_keys(images) -> list:
    return [("image", image) if isinstance(image, str) else ("own", position) for position, image in enumerate(images)]


def example_image(example: Example, image_field: str) -> str | None:
    """The name of an example's image: its meta field ``image_field``, else its image path, else None."""
    name = example.meta.get(image_field)
    if name is not None:
        return str(name)
    return str(example.image) if example.image is not None else None


def reads_pixels(flags_cfg) -> bool:
    """Whether a flag source reads images: image_nn does; a record's column and split overlap by name do not."""
    return FlagSourceKind(flags_cfg.kind) is FlagSourceKind.image_nn


def load_flags(cfg, benchmark: Benchmark, cache_dir: str | Path) -> FlagTable:
    """The flag table of ``cfg.detector.flags`` for ``benchmark``'s examples (released order);
    :class:`FlagSourceError` naming the source when it cannot be read or computed."""
    source = cfg.detector.flags
    kind = FlagSourceKind(source.kind)
    read = {FlagSourceKind.column: _column_flags, FlagSourceKind.split_overlap: _split_overlap_flags,
            FlagSourceKind.image_nn: _image_nn_flags}[kind]
    try:
        judged, details, warnings = read(cfg, benchmark, Path(cache_dir))
    except FlagSourceError:
        raise
    except Exception as error:  # the cell is refused naming the source, whatever failed underneath
        raise FlagSourceError(f"flag source {source.name} (detector.flags, kind {kind.value}) could not be read: "
                              f"{type(error).__name__}: {error}") from error
    field_ = str(cfg.detector.image_field)
    rows = [(example.example_id, example_image(example, field_), judged[example.example_id])
            for example in benchmark.examples if example.example_id in judged]
    table = pd.DataFrame(rows, columns=list(FLAG_COLUMNS))
    if table.empty:
        raise FlagSourceError(f"flag source {source.name} (kind {kind.value}) judged none of the "
                              f"{len(benchmark.examples)} examples of bench={cfg.bench.name}")
    flag_table = FlagTable(str(source.name), table, len(benchmark.examples) - len(table), details, tuple(warnings))
    counts = flag_table.metrics()
    log.info("flag source %s flagged %d of %d questions and %d of %d images (%d examples unjudged)", source.name,
             counts["flags_n_questions_flagged"], counts["flags_n_questions"], counts["flags_n_images_flagged"],
             counts["flags_n_images"], counts["flags_n_unjudged"])
    return flag_table


def parse_flags(values, example_ids, column: str) -> np.ndarray:
    """A flag column as booleans (true/false, 1/0, "true"/"false"); a ValueError naming the first other value."""
    words = {True: True, False: False, 1: True, 0: False, "true": True, "false": False, "1": True, "0": False}
    read = [words.get(value.strip().lower() if isinstance(value, str) else value) for value in values]
    bad = [(example_id, value) for example_id, value, flag in zip(example_ids, values, read) if flag is None]
    if bad:
        raise ValueError(f"{len(bad)} flag(s) in column {column!r} are not true/false (first: {bad[0][0]}: {bad[0][1]!r})")
    return np.asarray(read, dtype=bool)


def _column_flags(cfg, benchmark: Benchmark, cache_dir: Path):
    from medexp.config import listed_model_config
    from medexp.models.records import is_record, model_example_scores

    source = cfg.detector.flags
    model_cfg = cfg.model if source.model is None else listed_model_config(str(source.model))
    if not is_record(model_cfg):
        raise FlagSourceError(
            f"flag source {source.name} reads column {source.column!r} of a record of scores, but model={model_cfg.name} "
            f"is not one (it holds no flag column); name the record that does: detector.flags.model=<record>")
    table, _ = model_example_scores(model_cfg, benchmark.examples, cache_dir, cfg.bench)
    if source.column not in table.columns:
        raise FlagSourceError(f"flag source {source.name}: column {source.column!r} is not a field of model="
                              f"{model_cfg.name}'s record (it has {list(table.columns)})")
    flags = parse_flags(list(table[source.column]), list(table["example_id"]), str(source.column))
    return dict(zip(table["example_id"], flags.tolist())), {}, []


def _split_overlap_flags(cfg, benchmark: Benchmark, cache_dir: Path):
    source, field_ = cfg.detector.flags, str(cfg.detector.image_field)
    own = {example.example_id: example_image(example, field_) for example in benchmark.examples}
    flagged: set[str] = set()
    details = {}
    for split in source.splits:
        if split == cfg.bench.split:
            raise FlagSourceError(f"flag source {source.name}: detector.flags.splits names {split}, the cell's own "
                                  "split; list the splits whose images would flag it")
        names = {example_image(example, field_) for example in other_split(cfg.bench, str(split), cache_dir).examples}
        names.discard(None)
        hits = {example_id for example_id, image in own.items() if image in names}
        details.update({f"flags_split_images.{split}": float(len(names)),
                        f"flags_n_questions_flagged.{split}": float(len(hits)),
                        f"flags_n_images_flagged.{split}": float(len({own[example_id] for example_id in hits}))})
        flagged |= hits
    judged = {example_id: example_id in flagged for example_id, image in own.items() if image is not None}
    return judged, details, []


def other_split(bench_cfg, split: str, cache_dir: Path) -> Benchmark:
    """Every row of ``split`` of the cell's benchmark, from its annotations where the format allows
    (no image is opened): an image corpus's reading, so question filters and the audited split's
    cap and counts do not apply."""
    from medexp.benchmarks import load_benchmark_from_config

    other = copy.deepcopy(bench_cfg)
    other.split = split
    other.image_only = True
    other.max_examples = None
    other.expected_examples = None
    other.expected_by_split = None
    return load_benchmark_from_config(other, cache_dir, pixels=False)


def _image_nn_flags(cfg, benchmark: Benchmark, cache_dir: Path):
    from medexp.images.audit import corpus_seed, image_nn_audit

    detector = copy.deepcopy(cfg.detector.flags.image_nn)
    detector.max_panels = 0  # the flags need no adjudication panels
    result = image_nn_audit(benchmark.examples, detector, cache_dir, corpus_seed(cfg.seed, detector))
    questions = result.extra_tables["questions"]
    metrics = result.metrics
    details = {"flags_tau": float(metrics["tau"]), "flags_tau_degenerate": float(metrics["tau_degenerate"]),
               "flags_n_exact_duplicates_images": float(metrics["n_exact_duplicates_images"]),
               "flags_image_nn_p_value": float(metrics["p_value"])}
    return (dict(zip(questions["example_id"], questions["flagged"].astype(bool).tolist())), details,
            [f"flag source {cfg.detector.flags.name}: {warning}" for warning in result.warnings])
