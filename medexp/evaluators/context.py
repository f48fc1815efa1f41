"""What an evaluator is handed: the cell's config, seed, examples and cache, and its model on demand."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig

from medexp.benchmarks.base import Benchmark, Example
from medexp.detectors.base import DetectorResult
from medexp.evaluators.flag_sources import FlagTable
from medexp.models.keys import model_cache_key


@dataclass
class CellContext:
    """Everything an evaluator may use; the model is loaded only when a score is not cached."""

    cfg: DictConfig
    seed: int
    benchmark: Benchmark
    examples: list[Example]  # released order until the control has chosen its examples and order
    cache_dir: Path
    # Model configs joining detector.cohort as references (external baselines; when a baseline
    # is the audited model, the cell's own model too). Entries naming the target are skipped.
    cohort_additions: list[DictConfig] = field(default_factory=list)
    corpus: Benchmark | None = None  # a reference image corpus (Input.corpus), loaded with the cell's inputs
    twin: Benchmark | None = None  # the bench's perturbed twin (Input.twin), loaded with the cell's inputs
    flags: FlagTable | None = None  # the flags of the detector's flag source (Input.flags), loaded with the cell's inputs
    # Models on record (source: scores) read so far, by model name: what their files gave and skipped.
    records: dict = field(default_factory=dict)

    @functools.cached_property
    def model_key(self) -> dict:
        return model_cache_key(self.cfg.model, self.cache_dir)

    @functools.cached_property
    def _scorer(self):
        from medexp.models import load_scorer

        return load_scorer(self.cfg.model, self.cache_dir)

    def scorer(self):
        return self._scorer

    def example_scores(self, examples: list[Example] | None = None, model_cfg=None):
        """The per-example score table of ``examples`` (the cell's by default) under ``model_cfg``
        (the cell's model by default): scored through the cache, or read from the file of a model
        on record, whose counts of rows read and skipped join the cell's metrics."""
        from medexp.models.records import is_record, model_example_scores

        examples = self.examples if examples is None else examples
        own = model_cfg is None
        model_cfg = self.cfg.model if own else model_cfg
        scorer = self.scorer if own else None
        # the cell's own model: its cached key (a record has none: its file is read)
        key = self.model_key if own and not is_record(model_cfg) else None
        table, record = model_example_scores(model_cfg, examples, self.cache_dir, self.cfg.bench, scorer, key)
        if record is not None:
            self.records[str(model_cfg.name)] = record
        return table

    def nonmember_examples(self, split: str) -> list[Example]:
        """The examples of ``split`` of the cell's benchmark, as non-members against the cell's
        examples (members: the split its model saw); ``split`` must be another split, which no
        model of the cell trained on (the demo's heldout). The cell's control changes their inputs
        as it changed the members' (``blind_image``: no images on either side)."""
        from medexp.benchmarks import load_benchmark_from_config
        from medexp.config.schemas import ControlKind
        from medexp.controls import control_nonmembers

        if split == self.cfg.bench.split:
            raise ValueError(f"detector.nonmember_split={split} is the cell's own split (the members)")
        bench_cfg = copy.deepcopy(self.cfg.bench)
        bench_cfg.split = split
        released = list(load_benchmark_from_config(bench_cfg, self.cache_dir).examples)
        return control_nonmembers(ControlKind(self.cfg.control.kind), released)

    def scoring_metrics(self) -> dict[str, float]:
        """``tokens_naive``, ``tokens_computed`` and ``images_processed`` (the images the image
        processor ran on) of the teacher-forced scoring this cell ran (see
        ``medexp.models.hf.TokenCounts``); none when the model was never loaded (every
        score came from the cache: nothing was computed) or its scorer does not count tokens.
        The counts describe this run's work, so they are not stored with the cached scores,
        whose key leaves out how they were computed (``model.shared_prefix``)."""
        metrics = {}
        for name, record in self.records.items():  # the cell's own model unsuffixed, others by name
            metrics.update(record.metrics("" if name == str(self.cfg.model.name) else f".{name}"))
        counts = getattr(self.__dict__.get("_scorer"), "token_counts", None)
        if counts is None or not counts.naive:
            return metrics
        return {**metrics, "tokens_naive": float(counts.naive), "tokens_computed": float(counts.computed),
                "images_processed": float(counts.images_processed)}


# An evaluator: fetches the score tables or answers its detector needs and calls the detector.
Evaluator = Callable[[CellContext], DetectorResult]
