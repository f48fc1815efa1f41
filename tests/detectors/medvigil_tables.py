"""Small MedVIGIL probe and response tables written out by hand, for the metric tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from medexp.answers.table import response_row
from medexp.probes.base import LETTERS, Probe

OPTIONS = ("alpha", "beta", "gamma", "delta", "Cannot tell from the evidence.")
REFUSAL_GOLD = {"false_premise", "roi_masked"}

# case -> (tier, text_only_answerable, [(kind, outcome), ...]); outcomes: C correct, W a wrong
# answer (the first non-gold, non-refusal option), R the refusal option, U unparsed, E error.
CASES = {
    "c1": ("L1", False, [("original", "C"), ("paraphrase", "C"), ("negation", "W"), ("specificity_drop", "C"),
                         ("knowledge_only", "C"), ("false_premise", "C"), ("roi_only", "C"), ("roi_masked", "W"),
                         ("lr_flip", "C"), ("blur_0", "C"), ("blur_8", "C"), ("no_image", "W")]),
    "c2": ("L3", False, [("original", "C"), ("paraphrase", "W"), ("negation", "C"), ("specificity_drop", "U"),
                         ("knowledge_only", "C"), ("false_premise", "W"), ("false_premise", "E"), ("roi_only", "C"),
                         ("roi_masked", "C"), ("lr_flip", "W"), ("blur_0", "C"), ("blur_8", "W"),
                         ("no_image", "W")]),
    "c3": ("L5", None, [("original", "W"), ("paraphrase", "W"), ("negation", "C"), ("specificity_drop", "C"),
                        ("knowledge_only", "E"), ("false_premise", "W"), ("roi_only", "W"), ("roi_masked", "C"),
                        ("lr_flip", "C"), ("blur_0", "W"), ("blur_8", "W"), ("no_image", "C")]),
    "c4": ("L3", True, [("original", "C"), ("paraphrase", "E"), ("negation", "C"), ("specificity_drop", "C"),
                        ("knowledge_only", "C"), ("false_premise", "C"), ("roi_only", "C"), ("roi_masked", "E"),
                        ("lr_flip", "C"), ("blur_0", "C"), ("blur_8", "C"), ("no_image", "C")]),
}


def make_probe(case: str, kind: str, index: int, tier, text_only, options=OPTIONS, gold_text=None) -> Probe:
    refusal = LETTERS[options.index(OPTIONS[-1])]
    if gold_text is None:
        gold = refusal if kind in REFUSAL_GOLD else LETTERS[options.index(OPTIONS[0])]
    else:
        gold = LETTERS[options.index(gold_text)]
    return Probe(f"{case}::{kind}::{index}", case, kind, f"question {case} {kind}", gold, options=options,
                 refusal=refusal, meta={"risk_tier": tier, "text_only_answerable": text_only})


def reply(probe: Probe, outcome: str) -> dict:
    wrong = next(letter for letter in LETTERS[:len(probe.options)] if letter not in (probe.gold, probe.refusal))
    if outcome == "E":
        return response_row(probe, "", None, "error", error="HTTP 503")
    if outcome == "U":
        return response_row(probe, "I am not sure", None, "unparsed")
    letter = {"C": probe.gold, "W": wrong, "R": probe.refusal}[outcome]
    return response_row(probe, letter, letter, "ok")


def build(cases=CASES) -> tuple[list[Probe], pd.DataFrame]:
    probes, rows = [], []
    for case, (tier, text_only, entries) in cases.items():
        for index, (kind, outcome) in enumerate(entries):
            probe = make_probe(case, kind, index, tier, text_only)
            probes.append(probe)
            rows.append(reply(probe, outcome))
    return probes, pd.DataFrame(rows)


def simulated_model(n_cases: int, skill: float, seed: int, refusal_rate: float = None,
                    difficulty: np.ndarray | None = None) -> tuple[list[Probe], pd.DataFrame]:
    """A model answering a MedVIGIL-like battery: P(correct) = skill shifted by each case's difficulty.

    ``refusal_rate`` (default ``skill``) is the chance of refusing on a trap or masked probe.
    """
    rng = np.random.default_rng(seed)
    difficulty = difficulty if difficulty is not None else np.zeros(n_cases)
    kinds = ["original", "paraphrase", "negation", "specificity_drop", "knowledge_only", "false_premise",
             "false_premise", "roi_only", "roi_masked", "lr_flip"]
    tiers = ["L1", "L2", "L3", "L4", "L5"]
    refusal_rate = skill if refusal_rate is None else refusal_rate
    probes, rows = [], []
    for case in range(n_cases):
        for index, kind in enumerate(kinds):
            probe = make_probe(f"case{case:04d}", kind, index, tiers[case % 5], False)
            base = refusal_rate if kind in REFUSAL_GOLD else skill
            p = float(np.clip(base + difficulty[case], 0.02, 0.98))
            probes.append(probe)
            rows.append(reply(probe, "C" if rng.random() < p else "W"))
    return probes, pd.DataFrame(rows)
