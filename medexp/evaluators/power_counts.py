"""How ``python -m medexp.power`` counts a detector's n on a benchmark, for the detectors whose
count is one of these general ones (a detector's declaration names its count as "module:function";
counts of one family sit with its evaluators).

Each takes the composed cell config and ``load(split=None)``, which loads the cell's benchmark (or
another split of it) as the cell would, and returns a
:class:`~medexp.detectors.declaration.PowerCount`.
"""

from __future__ import annotations

from medexp.detectors.declaration import PowerCount


def examples(cfg, load) -> PowerCount:
    """Every example of the benchmark."""
    return PowerCount(n=len(load()))


def items_with_options(cfg, load) -> PowerCount:
    """The multiple-choice items, with the chance rate of answering them at random (mean 1/k over
    the items' k options; None without any)."""
    items = [example for example in load().examples if example.options is not None]
    rates = [1 / len(example.options) for example in items if example.options]
    return PowerCount(n=len(items), chance=sum(rates) / len(rates) if rates else None)


def shards(cfg, load) -> PowerCount:
    """The shards the detector config cuts the benchmark into (one example at least in each)."""
    n_examples = len(load())
    n = int(cfg.detector.shards)
    if not 2 <= n <= n_examples:
        raise ValueError(f"detector={cfg.detector.name} needs 2 <= detector.shards <= number of examples "
                         f"({n_examples}), got {n}")
    return PowerCount(n=n, lines=(f"{n_examples} examples cut into {n} shards",), sizes={"examples": n_examples})


def members_and_nonmembers(cfg, load) -> PowerCount:
    """The benchmark's examples as members and another split's (``detector.nonmember_split``) as non-members."""
    members = len(load())
    nonmembers = len(load(split=str(cfg.detector.nonmember_split)))
    return PowerCount(n=members + nonmembers, first=members, lines=(
        f"members: {members} (split {cfg.bench.split}), non-members: {nonmembers} "
        f"(split {cfg.detector.nonmember_split})",))
