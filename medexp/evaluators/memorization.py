"""Evaluators of the differential detectors (memorization, membership).

The cell's model is the candidate of the first pair (``detector.pairs``; see
``medexp.train.pairs`` for how pairs and their seed replicates resolve). Members and
non-members:

* a trained candidate (``source: trained``): its canary and test partitions, read from the
  training records of the pairs' models (they must all agree); the cell's benchmark must be the
  data they were trained on;
* any other candidate: the cell's examples (the split the candidate saw: the demo's test split
  for demo_leaky) and the split ``detector.nonmember_split`` of the same benchmark (the demo's
  heldout split, which no demo model trains on).

Every model scores the members and non-members once, through the score cache. The membership
cell's distribution-shift control reads the members' and non-members' inputs only: their text
(question, options, answer) and, when every example has an image, simple image statistics.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections import Counter

import numpy as np

from medexp.benchmarks.base import Example
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import PowerCount
from medexp.evaluators.context import CellContext
from medexp.models.keys import model_cache_key

log = logging.getLogger("medexp")


def memorization(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import memorization_detector
    from medexp.evaluators.simulated_power_cache import with_simulated_mde

    inputs = DifferentialInputs(ctx)
    atypicality = None
    if ctx.cfg.detector.embedder is not None:
        atypicality = _atypicality(inputs, ctx.cfg.detector.embedder, ctx.cache_dir)
    result = memorization_detector(inputs.losses(), ctx.cfg.detector, ctx.seed, atypicality)
    result.metrics.update(inputs.training_metrics())
    sizes = {"members": int(result.metrics["n_members"]), "nonmembers": int(result.metrics["n_nonmembers"])}
    return with_simulated_mde(result, "memorization", sizes, float(ctx.cfg.detector.alpha), ctx.cache_dir)


def membership(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import membership_detector

    inputs = DifferentialInputs(ctx)
    losses = inputs.losses(list(ctx.cfg.detector.reference_models), int(ctx.cfg.detector.trained_references))
    result = membership_detector(losses, shift_inputs(inputs.examples), ctx.cfg.detector, ctx.seed)
    result.metrics.update(inputs.training_metrics())
    return result


class DifferentialInputs:
    """The pairs of a cell, its members and non-members, and the models' losses on them."""

    def __init__(self, ctx: CellContext):
        from medexp.train.pairs import is_trained, resolve_pairs

        self.ctx = ctx
        detector = ctx.cfg.detector
        self.pairs = resolve_pairs(ctx.cfg.model, detector.pairs, detector.seeds)
        trained = {is_trained(pair.candidate) for pair in self.pairs}
        if len(trained) > 1:
            raise ValueError("detector.pairs mixes trained candidates (source: trained) with others; "
                             "their members are defined differently, audit them in separate cells")
        self.trained = trained.pop()
        self.members, self.nonmembers = self._trained_split() if self.trained else self._benchmark_split()
        self.examples = self.members + self.nonmembers
        log.info("%s: %d pair(s), %d members, %d non-members", detector.name, len(self.pairs),
                 len(self.members), len(self.nonmembers))

    # ------------------------------------------------------------------ members and non-members
    def _benchmark_split(self) -> tuple[list[Example], list[Example]]:
        ctx = self.ctx
        split = ctx.cfg.detector.nonmember_split
        if not split:
            raise ValueError(f"detector.nonmember_split is unset: model={ctx.cfg.model.name} is not a trained model "
                             "with a test partition, so name a split of the benchmark that none of the pair's models "
                             "trained on (the demo's is heldout)")
        return list(ctx.examples), ctx.nonmember_examples(split)

    def _trained_split(self) -> tuple[list[Example], list[Example]]:
        ctx = self.ctx
        parts = None
        for record, name in self.records:
            found = (tuple(record["partition"]["canary"]), tuple(record["partition"]["test"]))
            if parts is None:
                parts, first = found, name
            elif found != parts:
                raise ValueError(f"models {first} and {name} were trained on different partitions; "
                                 "the pairs of a cell must share their canaries and test examples")
        canary, test = (set(part) for part in parts)
        by_id = {example.example_id: example for example in ctx.examples}
        missing = [i for i in [*parts[0], *parts[1]] if i not in by_id]
        if missing:
            raise ValueError(f"bench={ctx.cfg.bench.name} lacks {len(missing)} of the examples model={ctx.cfg.model.name} "
                             f"was partitioned on (first: {missing[0]}); run the cell on the data it was trained on "
                             f"(bench={ctx.cfg.model.train.data.name})")
        return ([ex for ex in ctx.examples if ex.example_id in canary],
                [ex for ex in ctx.examples if ex.example_id in test])

    @functools.cached_property
    def records(self) -> list[tuple[dict, str]]:
        """(training record, model name) of every model of the pairs, candidate then independent."""
        from medexp.models import model_location
        from medexp.train.models import read_manifest

        records = []
        for pair in self.pairs:
            for model in (pair.candidate, pair.independent):
                if model.get("train") is None:
                    raise ValueError(f"model={model.name} is paired with a trained candidate but is not a trained model")
                records.append((read_manifest(model_location(model, self.ctx.cache_dir)), str(model.name)))
        return records

    # ------------------------------------------------------------------ losses
    def class_of(self, example: Example) -> str:
        field = str(self.ctx.cfg.detector.class_field)
        if field == "answer":
            return example.answer
        if field not in example.meta:
            raise ValueError(f"detector.class_field={field}: {example.example_id} has no such meta field "
                             f"(its fields: {sorted(example.meta)}; 'answer' uses the gold answer)")
        return str(example.meta[field])

    def losses(self, reference_models: list[str] | None = None, trained_references: int = 0):
        """The pairs' losses; the scores of ``reference_models`` (which saw none of the examples)
        and of ``trained_references`` reference models trained on random halves of the examples."""
        from medexp.config import listed_model_config
        from medexp.detectors import PairedLosses

        classes = [self.class_of(example) for example in self.examples]
        # the class's share among every example the cell considers (for a classification dataset:
        # the whole dataset, members and non-members included)
        seen = {example.example_id for example in self.ctx.benchmark.examples}
        population = [self.class_of(ex) for ex in self.ctx.benchmark.examples]
        population += [cls for ex, cls in zip(self.examples, classes) if ex.example_id not in seen]
        counts = Counter(population)
        frequency = [counts[cls] / len(population) for cls in classes]
        tables = [(pair.label, self._scores(pair.candidate), self._scores(pair.independent)) for pair in self.pairs]
        # entries may carry overrides ("demo_clean_replicate demo.seed=11"); each is labelled by its model name
        references = [(str(cfg.name), self._scores(cfg), frozenset())
                      for cfg in map(listed_model_config, map(str, reference_models or []))]
        references += [(str(cfg.name), self._scores(cfg), seen) for cfg, seen in self.trained_references(trained_references)]
        return PairedLosses.from_score_tables(
            [example.example_id for example in self.examples], [True] * len(self.members) + [False] * len(self.nonmembers),
            classes, frequency, tables, references,
        )

    def trained_references(self, count: int) -> list[tuple[object, frozenset[str]]]:
        """(model config, ids it trained on) of ``count`` reference models of the cell's candidate,
        built once into the cache: the candidate's recipe over random halves of the members and
        non-members (a demo candidate's splits: the cell's and ``nonmember_split``)."""
        from omegaconf import OmegaConf

        from medexp.config.schemas import ModelSource
        from medexp.demo.models import demo_reference_dir, read_build_report

        if count == 0:
            return []
        candidate = self.pairs[0].candidate
        if self.trained or ModelSource(candidate.source) is not ModelSource.demo:
            raise ValueError(f"detector.trained_references builds reference models of a demo model; model={candidate.name} "
                             "is not one: list models that saw none of the examples in detector.reference_models")
        # the splits the members and non-members come from; a cell auditing fewer examples
        # (bench.max_examples) reads the same references, which trained on the whole splits
        splits = [str(self.ctx.cfg.bench.split), str(self.ctx.cfg.detector.nonmember_split)]
        built = []
        for index in range(count):
            directory = demo_reference_dir(candidate.demo, index, splits, self.ctx.cache_dir)
            seen = frozenset(read_build_report(directory)["leaked_example_ids"])
            # loaded from its directory like any saved checkpoint; the score cache keys it by its weights
            config = OmegaConf.merge(candidate, {"name": f"{candidate.name}_reference{index}", "source": ModelSource.hub.value,
                                                 "pretrained": str(directory), "demo": None, "independent": None})
            built.append((config, seen))
        return built

    def _scores(self, model_cfg):
        from medexp.models import load_scorer
        from medexp.scoring import example_scores

        if model_cfg is self.ctx.cfg.model:
            return example_scores(self.ctx.scorer, self.ctx.model_key, self.examples, self.ctx.cache_dir)
        log.info("model %s: scoring %d examples (cached after the first time)", model_cfg.name, len(self.examples))
        scorer = functools.cache(functools.partial(load_scorer, model_cfg, self.ctx.cache_dir))
        return example_scores(scorer, model_cache_key(model_cfg, self.ctx.cache_dir), self.examples, self.ctx.cache_dir)

    def training_metrics(self) -> dict[str, float]:
        """Trained pairs: the candidates' and independents' accuracy on the test partition, and
        the accountant's epsilon under DP, averaged over the pairs."""
        if not self.trained:
            return {}
        records = [record for record, _ in self.records]
        candidates, independents = records[0::2], records[1::2]
        metrics = {
            "candidate_test_accuracy": float(np.mean([r["accuracy"]["test"] for r in candidates])),
            "independent_test_accuracy": float(np.mean([r["accuracy"]["test"] for r in independents])),
        }
        epsilons = [r["epsilon"] for r in candidates if "epsilon" in r]
        if epsilons:
            metrics["train_epsilon"] = float(np.mean(epsilons))
        return metrics


def shift_inputs(examples: list[Example]):
    """What the shift control reads of each example: its text (question, options, answer) and,
    when every example has an image, the image's statistics."""
    from medexp.stats.shift import ShiftInputs

    texts = [" ".join([example.question, *(example.options or ()), example.answer]) for example in examples]
    with_images = all(example.image is not None for example in examples)
    return ShiftInputs(texts, _image_statistics([example.image for example in examples]) if with_images else None)


def _image_statistics(paths) -> np.ndarray:
    """Per image: width, height, and each RGB channel's mean and standard deviation (cheap
    statistics in which two image sources, scanners or preprocessings tend to differ)."""
    from medexp.benchmarks.images import read_image

    rows = []
    for path in paths:
        pixels = np.asarray(read_image(path, "RGB"), dtype=np.float64)
        rows.append([pixels.shape[1], pixels.shape[0], *pixels.mean(axis=(0, 1)), *pixels.std(axis=(0, 1))])
    return np.asarray(rows)


def _atypicality(inputs: DifferentialInputs, embedder_cfg, cache_dir) -> np.ndarray:
    """Per example, the cosine distance of a member's embedding to its class's centroid (the mean
    of the class's member embeddings); NaN for non-members."""
    from medexp.images.embedders import load_embedder
    from medexp.images.store import distinct_images, embed_images, normalise

    members = inputs.members
    if any(example.image is None for example in members):
        raise ValueError("atypicality needs an image for every member; some have none")
    images = distinct_images([ex.image for ex in members], cache_dir)
    vectors = embed_images(load_embedder(embedder_cfg), images, cache_dir, int(embedder_cfg.batch_size),
                           int(embedder_cfg.shard_size), desc="embedding canaries")
    features = vectors.rows(images.inverse)
    classes = np.array([inputs.class_of(example) for example in members])
    distance = np.empty(len(members))
    for cls in np.unique(classes):
        selected = classes == cls
        centroid = normalise(features[selected].mean(axis=0, keepdims=True))[0]
        distance[selected] = 1.0 - features[selected] @ centroid
    return np.concatenate([distance, np.full(len(inputs.nonmembers), np.nan)])


def memorization_sizes(cfg, load) -> PowerCount:
    """``python -m medexp.power``'s count for memorization: members and non-members, as its
    simulated test's sizes."""
    from medexp.evaluators.power_counts import members_and_nonmembers

    count = members_and_nonmembers(cfg, load)
    members, nonmembers = count.first, count.n - count.first
    counted = (f"{count.n} members and non-members: {members} members (split {cfg.bench.split}), "
               f"{nonmembers} non-members (split {cfg.detector.nonmember_split}); a trained candidate's own "
               "partitions differ")
    return dataclasses.replace(count, lines=(counted,), sizes={"members": members, "nonmembers": nonmembers})


def membership_sizes(cfg, load) -> PowerCount:
    """``python -m medexp.power``'s count for membership: the members and non-members of the
    benchmark's splits (a trained model's own partitions differ)."""
    from medexp.evaluators.power_counts import members_and_nonmembers

    count = members_and_nonmembers(cfg, load)
    return dataclasses.replace(count, lines=(count.lines[0] + "; a trained model's own partitions differ",))
