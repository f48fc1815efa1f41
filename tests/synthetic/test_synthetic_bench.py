"""bench=synthetic: the loader, its config and the format checks."""

from __future__ import annotations

import numpy as np
import pytest

from medexp.benchmarks import load_benchmark_from_config
from medexp.config import compose
from medexp.stats.calibration import draw_easiness


def _load(*overrides, cache_dir="/nonexistent-cache"):
    cfg = compose(["bench=synthetic", *overrides])
    return cfg, load_benchmark_from_config(cfg.bench, cache_dir)  # nothing is read or written


def test_appendix_b_defaults_and_example_layout():
    cfg, bench = _load("seed=7")
    assert (cfg.bench.synthetic.n_examples, cfg.bench.synthetic.open_fraction, cfg.bench.synthetic.closed_mean) == (
        1061, 0.6, 900.0)
    assert cfg.bench.synthetic.seed == 7  # the global seed
    assert len(bench) == 1061 and not bench.skipped
    assert [ex.example_id for ex in bench.examples[:2]] == ["synthetic::test::0", "synthetic::test::1"]
    assert [ex.position for ex in bench.examples] == list(range(1061))
    assert all(ex.image is None and ex.options is None for ex in bench.examples)
    types = [ex.meta["answer_type"] for ex in bench.examples]
    assert types.count("CLOSED") == 424 and types.count("OPEN") == 637
    # The easiness is the draw of the calibration model with the bench seed, in position order.
    expected = draw_easiness(1061, 0.6, 900.0, np.random.default_rng(7))
    np.testing.assert_array_equal([ex.meta["easiness"] for ex in bench.examples], expected.values)
    assert types == ["CLOSED" if closed else "OPEN" for closed in expected.closed]
    frame = bench.frame()
    assert {"answer_type", "easiness"} <= set(frame.columns)


def test_the_seed_and_the_parameters_change_the_draw():
    _, first = _load("seed=0")
    _, same = _load("seed=0")
    _, other = _load("seed=1")
    _, pinned = _load("seed=1", "bench.synthetic.seed=0")
    easiness = lambda bench: [ex.meta["easiness"] for ex in bench.examples]
    assert easiness(first) == easiness(same) == easiness(pinned)
    assert easiness(first) != easiness(other)
    _, small = _load("bench.synthetic.n_examples=10", "bench.synthetic.open_fraction=0.5")
    assert len(small) == 10 and sum(ex.meta["answer_type"] == "CLOSED" for ex in small.examples) == 5
    _, capped = _load("seed=0", "bench.max_examples=25")
    assert easiness(capped) == easiness(first)[:25]


def test_format_fields_are_checked_both_ways():
    with pytest.raises(ValueError, match=r"bench.synthetic is only read by format\(s\) \['synthetic'\], not demo"):
        _load("bench.format=demo")
    with pytest.raises(ValueError, match="bench=synthetic has no `synthetic:` section"):
        _load("bench.synthetic=null")
    with pytest.raises(ValueError, match=r"bench.synthetic.open_fraction=1.5 is out of range: allowed \[0, 1\]"):
        _load("bench.synthetic.open_fraction=1.5")
