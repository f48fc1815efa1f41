"""Evaluators of the dataset-level membership tests (dataset_inference, codec).

Members: the cell's examples (the split the model is audited on: the demo's test split, which
demo_leaky trained on). Non-members: ``detector.nonmember_split`` of the same benchmark (the
demo's heldout split, which no demo model trains on). Only the cell's model is read; members and
non-members are scored together in one score-cache entry, the one ``detector=membership`` reads
for the same model, so either cell reuses the other's scores.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pandas as pd

from medexp.benchmarks.base import Example
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import PowerCount
from medexp.evaluators.context import CellContext
from medexp.kernel.hashing import derive_seed

log = logging.getLogger("medexp")


def dataset_inference(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import dataset_inference_detector

    members, nonmembers = _split(ctx)
    table = _scores(ctx, members + nonmembers)
    table["answer"] = [example.answer for example in members + nonmembers]
    return dataset_inference_detector(table.iloc[: len(members)].reset_index(drop=True),
                                      table.iloc[len(members) :].reset_index(drop=True), ctx.cfg.detector, ctx.seed)


def codec(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import codec_detector

    members, nonmembers = _split(ctx)
    cfg = ctx.cfg.detector
    rng = np.random.default_rng(derive_seed(ctx.seed, "codec", "contexts"))
    # each group's contexts come from its own split: in-context examples "from the same dataset"
    with_context = (with_in_context_examples(members, int(cfg.n_context), str(cfg.context_template), rng)
                    + with_in_context_examples(nonmembers, int(cfg.n_context), str(cfg.context_template), rng))
    alone = _scores(ctx, members + nonmembers)
    in_context = _scores(ctx, with_context)
    n = len(members)
    parts = [table.iloc[rows].reset_index(drop=True) for table in (alone, in_context)
             for rows in (slice(0, n), slice(n, None))]
    members_alone, nonmembers_alone, members_in_context, nonmembers_in_context = parts
    return codec_detector(members_alone, members_in_context, nonmembers_alone, nonmembers_in_context, cfg)


def with_in_context_examples(examples: list[Example], n_context: int, template: str,
                             rng: np.random.Generator) -> list[Example]:
    """Each example with ``n_context`` others of the list, drawn at random without replacement and
    written by ``template``, prepended to its question. The example keeps its id and image: the
    score cache keys a table by content, so these are scored apart from the originals."""
    if len(examples) <= n_context:
        raise ValueError(f"codec: detector.n_context={n_context} needs more than {n_context} examples per split, "
                         f"got {len(examples)}")
    derived = []
    for index, example in enumerate(examples):
        others = rng.choice(len(examples) - 1, size=n_context, replace=False)
        others = others + (others >= index)  # skip the example itself
        context = "".join(template.format(question=examples[i].question, answer=examples[i].answer) for i in others)
        derived.append(dataclasses.replace(example, question=context + example.question))
    return derived


def _split(ctx: CellContext) -> tuple[list[Example], list[Example]]:
    members = list(ctx.examples)
    nonmembers = ctx.nonmember_examples(str(ctx.cfg.detector.nonmember_split))
    log.info("%s: %d members (split %s), %d non-members (split %s)", ctx.cfg.detector.name, len(members),
             ctx.cfg.bench.split, len(nonmembers), ctx.cfg.detector.nonmember_split)
    return members, nonmembers


def _scores(ctx: CellContext, examples: list[Example]) -> pd.DataFrame:
    from medexp.scoring import example_scores

    return example_scores(ctx.scorer, ctx.model_key, examples, ctx.cache_dir)


def tested_halves(cfg, load) -> PowerCount:
    """``python -m medexp.power``'s count for dataset_inference: the members and non-members of
    half B, the half its test runs on (half A fits the linear model)."""
    from medexp.detectors.dataset_inference import scored_half_size
    from medexp.evaluators.power_counts import members_and_nonmembers

    count = members_and_nonmembers(cfg, load)
    tested_members, tested_nonmembers = scored_half_size(count.first), scored_half_size(count.n - count.first)
    return PowerCount(n=tested_members + tested_nonmembers, first=tested_members, lines=(
        f"{count.lines[0]}; half B, the tested half: {tested_members} and {tested_nonmembers} (half A fits the model)",))
