"""The membership cell's shift control on the demo benchmark: its members (the test split) and
non-members (the heldout split) come from one generator, so the inputs alone must not tell them
apart. No model is needed: only the generated benchmark."""

from __future__ import annotations

import copy

import numpy as np

from medexp.benchmarks import load_benchmark_from_config
from medexp.config import compose
from medexp.evaluators.memorization import shift_inputs
from medexp.stats.shift import shift_test


def test_the_demo_members_and_non_members_are_drawn_alike(tmp_path):
    cfg = compose(["model=demo_leaky", "detector=membership"])
    members = load_benchmark_from_config(cfg.bench, tmp_path).examples
    heldout = copy.deepcopy(cfg.bench)
    heldout.split = cfg.detector.nonmember_split
    nonmembers = load_benchmark_from_config(heldout, tmp_path).examples
    inputs = shift_inputs([*members, *nonmembers])
    first = members[0]
    assert inputs.texts[0] == " ".join([first.question, *first.options, first.answer])
    # every demo example has an image: width, height and three channels' mean and spread
    assert inputs.numeric.shape == (len(members) + len(nonmembers), 8)
    labels = np.r_[np.ones(len(members), bool), np.zeros(len(nonmembers), bool)]
    result = shift_test(inputs, labels, int(cfg.detector.shift_folds), 199, 200, 0.95, seed=0)
    # measured with the cell's 499 permutations: AUC 0.517 [0.478, 0.554], p = 0.30
    assert abs(result.auc - 0.5) < 0.06 and result.ci_low < 0.5 < result.ci_high
    assert result.p_value > cfg.detector.alpha
