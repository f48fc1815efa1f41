"""A benchmark's perturbed twin: loaded from the bench config's ``twin:`` section and paired with
the originals item by item (paired semantic perturbation, Park et al. 2025).

Pairing (``twin.pair_by``): ``shared_id``, a twin has its original's upstream id (the VLMEvalKit
``index``, the local ``id``); ``source_id_field``, a twin's meta field names its original's
upstream id. What must hold, each failing with the ids concerned:

* a twin names an original the benchmark has (when the originals were read whole; under
  ``bench.max_examples`` a twin beyond the cap is left out and counted);
* no two twins name the same original;
* with ``answers_must_differ``, a pair's gold answers differ (case- and spacing-insensitive): the
  method changes the evidence so that the answer changes, and a pair with the same answer tests
  nothing about memory of the original's answer.

Unpaired items are counted by reason and logged, never silently dropped: an original without a
twin (the published twins cover the items that survived manual filtering; an error under
``require_every_original``), and a pair whose original or twin was skipped while loading (a
broken image).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from medexp.benchmarks.base import Benchmark, Example, SkippedExample
from medexp.benchmarks.options import normalise

log = logging.getLogger(__name__)

NO_TWIN = "no twin"
ORIGINAL_SKIPPED = "original skipped"
TWIN_SKIPPED = "twin skipped"
ORIGINAL_NOT_LOADED = "original beyond max_examples"
_SHOWN = 5  # ids named in an error message


@dataclass(frozen=True)
class TwinPairs:
    pairs: list[tuple[Example, Example]]  # (original, twin), in the originals' order
    unpaired: list[tuple[str, str]] = field(default_factory=list)  # (example id, "<reason>: <detail>")

    def unpaired_counts(self) -> dict[str, int]:
        return dict(Counter(reason.split(":", 1)[0] for _, reason in self.unpaired))


def twin_bench_config(bench_cfg):
    """The bench config of ``bench_cfg``'s twins: ``twin.bench`` (else ``bench_cfg`` itself, named
    ``<name>_twin``) with the twin's split, root and TSV file where set, read whole."""
    from omegaconf import OmegaConf

    from medexp.config import bench_config
    from medexp.config.schemas import BenchConfig

    twin = bench_cfg.get("twin")
    if twin is None:
        raise ValueError(f"bench={bench_cfg.name} declares no twin: add a twin: section naming the perturbed "
                         "set (see conf/bench/mmstar_tsv.yaml)")
    base = bench_config(str(twin.bench)) if twin.bench else bench_cfg
    cfg = OmegaConf.merge(OmegaConf.structured(BenchConfig), OmegaConf.to_container(base, resolve=True))
    if not twin.bench:
        cfg.name = f"{bench_cfg.name}_twin"
    for key in ("split", "root", "tsv_file"):
        if twin.get(key) is not None:
            cfg[key] = twin[key]
    cfg.twin = None
    cfg.max_examples = None  # pairing needs every twin; the cap applies to the originals
    cfg.expected_examples = None
    cfg.expected_by_split = None  # the originals' counts, not the twins'
    return cfg


def load_twin(bench_cfg, cache_dir: str | Path) -> Benchmark:
    """The twin benchmark ``bench_cfg.twin`` describes."""
    from medexp.benchmarks import load_benchmark_from_config

    return load_benchmark_from_config(twin_bench_config(bench_cfg), cache_dir)


def source_id(example_id: str) -> str:
    """The upstream id of ``<benchmark>::<split>::<source id>``."""
    return example_id.split("::", 2)[-1]


def pair_twins(originals: Sequence[Example], original_skipped: Sequence[SkippedExample], twins: Benchmark,
               twin_cfg, originals_complete: bool = True, bench_name: str = "bench") -> TwinPairs:
    """Pair ``originals`` with ``twins`` as ``twin_cfg`` (a bench config's ``twin`` section) says.

    ``original_skipped``: the originals skipped while loading (their twins are unpaired, not
    errors); ``originals_complete``: false when the originals were capped, so a twin naming an
    original not loaded is counted rather than refused.
    """
    from medexp.config.schemas.twin import PairBy

    by_field = PairBy(twin_cfg.pair_by) is PairBy.source_id_field
    field_name = str(twin_cfg.source_id_field) if by_field else None
    by_source = {source_id(example.example_id): example for example in originals}
    skipped_source = {source_id(item.example_id): item for item in original_skipped if item.example_id}
    where = f"bench={bench_name} twin ({twins.name})"
    twin_of: dict[str, Example] = {}
    unknown, repeated, unpaired = [], [], []
    for twin in twins.examples:
        if by_field and twin.meta.get(field_name) in (None, ""):
            raise ValueError(f"{where}: {twin.example_id} has no meta field {field_name!r} naming its original "
                             f"(its fields: {sorted(twin.meta)})")
        key = str(twin.meta[field_name]).strip() if by_field else source_id(twin.example_id)
        if key in skipped_source:
            unpaired.append((skipped_source[key].example_id, f"{ORIGINAL_SKIPPED}: {skipped_source[key].reason}"))
        elif key not in by_source:
            if originals_complete:
                unknown.append(f"{twin.example_id} -> {key}")
            else:
                unpaired.append((twin.example_id, f"{ORIGINAL_NOT_LOADED}: names {key!r}"))
        elif key in twin_of:
            repeated.append(f"{twin_of[key].example_id} and {twin.example_id} -> {key}")
        else:
            twin_of[key] = twin
    how = f"by the meta field {field_name!r}" if by_field else "by shared id (the twin's index is its original's)"
    _refuse(unknown, f"{where}: {{n}} twin(s) name an original the benchmark does not have (paired {how})")
    _refuse(repeated, f"{where}: {{n}} original(s) claimed by more than one twin")
    # A skipped twin has no meta left to say whose twin it was under pair_by=source_id_field.
    skipped_twins = {} if by_field else {source_id(item.example_id): item for item in twins.skipped if item.example_id}
    if by_field:
        unpaired.extend((item.label, f"{TWIN_SKIPPED}: {item.reason}") for item in twins.skipped)
    pairs, same_answer, missing = [], [], []
    for original in originals:
        key = source_id(original.example_id)
        twin = twin_of.get(key)
        if twin is None:
            skipped = skipped_twins.get(key)
            if skipped is not None:
                unpaired.append((original.example_id, f"{TWIN_SKIPPED}: {skipped.reason}"))
            else:
                missing.append(original.example_id)
            continue
        if twin_cfg.answers_must_differ and normalise(original.answer) == normalise(twin.answer):
            same_answer.append(f"{original.example_id} / {twin.example_id} ({original.answer!r})")
        pairs.append((original, twin))
    _refuse(same_answer, f"{where}: {{n}} pair(s) have the same answer, but twin.answers_must_differ "
                         "(the perturbation must change the answer)")
    if twin_cfg.require_every_original:
        _refuse(missing, f"{where}: {{n}} original(s) have no twin, but twin.require_every_original is set")
    unpaired.extend((example_id, f"{NO_TWIN}: no twin names it") for example_id in missing)
    result = TwinPairs(pairs, unpaired)
    if unpaired:
        log.warning("%s: %d pairs; unpaired items: %s (first: %s)", where, len(pairs), result.unpaired_counts(),
                    unpaired[0][0])
    if not pairs:
        raise ValueError(f"{where}: no original has a twin ({result.unpaired_counts()})")
    return result


def _refuse(items: list[str], message: str) -> None:
    if items:
        shown = "; ".join(items[:_SHOWN]) + (f"; ... ({len(items) - _SHOWN} more)" if len(items) > _SHOWN else "")
        raise ValueError(f"{message.format(n=len(items))}: {shown}")
