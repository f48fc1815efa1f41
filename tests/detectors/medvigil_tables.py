"""Small MedVIGIL probe and response tables written out by hand, for the metric tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from medexp.answers.table import response_row
from medexp.benchmarks.options import LETTERS
from medexp.probes.base import Probe
from tests.answers.judging import judged_table

OPTIONS = ("alpha", "beta", "gamma", "delta", "Cannot tell from the evidence.")
REFUSAL_GOLD = {"false_premise", "roi_masked"}

# case -> (tier, text_only_answerable, [(kind, outcome), ...]); outcomes: C correct, W a wrong
# answer (the first non-gold, non-refusal option), R the refusal option, U no answer (a reply naming
# two options), E error.
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
        return response_row(probe, "", None, "error", error="HTTP 503", cause="http_5xx")
    if outcome == "U":
        return response_row(probe, f"{probe.options[0]} or {probe.options[1]}")
    return response_row(probe, {"C": probe.gold, "W": wrong, "R": probe.refusal}[outcome])


def build(cases=CASES) -> tuple[list[Probe], pd.DataFrame]:
    probes, rows = [], []
    for case, (tier, text_only, entries) in cases.items():
        for index, (kind, outcome) in enumerate(entries):
            probe = make_probe(case, kind, index, tier, text_only)
            probes.append(probe)
            rows.append(reply(probe, outcome))
    return probes, judged_table(rows, probes)


KINDS = ["original", "paraphrase", "negation", "specificity_drop", "knowledge_only", "false_premise",
         "false_premise", "roi_only", "roi_masked", "lr_flip"]


def battery(n_cases: int) -> list[Probe]:
    """A MedVIGIL-like battery: ten probes per case, tiers L1..L5 in turn."""
    return [make_probe(f"case{case:04d}", kind, index, f"L{case % 5 + 1}", False)
            for case in range(n_cases) for index, kind in enumerate(KINDS)]


def answers(probes: list[Probe], p_correct: np.ndarray, rng: np.random.Generator,
            random_wrong: bool = False) -> pd.DataFrame:
    """A judged table: probe i answered correctly with probability p_correct[i], else a wrong letter
    (built directly, as judge=read judges a reply that is a letter: the simulations draw many).

    The wrong letter is the first that is neither gold nor refusal, or (``random_wrong``) any
    non-gold letter drawn uniformly, as a model blind to positions would pick.
    """
    correct = rng.random(len(probes)) < p_correct
    if random_wrong:
        wrong = [rng.choice([x for x in LETTERS[:len(p.options)] if x != p.gold]) for p in probes]
    else:
        wrong = [next(letter for letter in LETTERS if letter not in (p.gold, p.refusal)) for p in probes]
    choice = np.where(correct, [p.gold for p in probes], wrong)
    return pd.DataFrame({
        "probe_id": [p.probe_id for p in probes], "example_id": [p.example_id for p in probes],
        "kind": [p.kind for p in probes], "gold": [p.gold for p in probes], "refusal": [p.refusal for p in probes],
        "response": choice, "choice": choice, "status": "ok", "error": None, "error_cause": None,
        "option_logliks": None, "committed": choice, "verdict": np.where(correct, "correct", "wrong"),
        "judge": "read", "reason": "option letter", "score": None, "correct": correct,
    })


def skill_probabilities(probes: list[Probe], skill: float, refusal_rate: float,
                        difficulty: np.ndarray) -> np.ndarray:
    """P(correct) per probe: ``skill`` (``refusal_rate`` where the refusal is the gold) plus the case's difficulty."""
    case_index = np.array([int(p.example_id.removeprefix("case")) for p in probes])
    base = np.array([refusal_rate if p.kind in REFUSAL_GOLD else skill for p in probes])
    return np.clip(base + difficulty[case_index], 0.02, 0.98)


def simulated_model(n_cases: int, skill: float, seed: int, refusal_rate: float | None = None,
                    difficulty: np.ndarray | None = None) -> tuple[list[Probe], pd.DataFrame]:
    """One model answering the battery of ``n_cases`` cases."""
    probes = battery(n_cases)
    difficulty = np.zeros(n_cases) if difficulty is None else difficulty
    p = skill_probabilities(probes, skill, skill if refusal_rate is None else refusal_rate, difficulty)
    return probes, answers(probes, p, np.random.default_rng(seed))
