"""The tables a MedVIGIL cell reports beside its metrics: replies per kind and status, accuracy
per kind under both error conventions, letter preference, and the silent-failure rate by tier."""

from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from medexp.answers.table import Status
from medexp.config.tiers import TIERS
from medexp.detectors.medvigil_metrics import CONVENTIONS, kept_rows


def status_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Probes per kind and status (ok, no_answer, error), with a total row."""
    counts = pd.crosstab(table["kind"], table["status"]).reindex(columns=[s.value for s in Status], fill_value=0)
    counts.loc["all"] = counts.sum()
    counts["n"] = counts.sum(axis=1)
    return counts.reset_index().rename(columns={"index": "kind"})


def per_kind_table(table: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per kind under both conventions."""
    rows = []
    for kind, group in table.groupby("kind", sort=False):
        row: dict[str, Any] = {"kind": kind}
        for convention in CONVENTIONS:
            kept = kept_rows(group, convention)
            row[f"n_{convention}"] = len(kept)
            row[f"acc_{convention}"] = 100.0 * kept["correct"].mean() if len(kept) else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def letter_preference(table: pd.DataFrame) -> pd.DataFrame:
    """How often each letter was chosen and was the gold, over the ok replies."""
    ok = table[table["status"] == Status.ok.value]
    chosen = ok["choice"].value_counts()
    gold = ok["gold"].value_counts()
    letters = sorted(set(chosen.index) | set(gold.index))
    total = max(len(ok), 1)
    return pd.DataFrame([
        {"letter": letter, "chosen": int(chosen.get(letter, 0)), "gold": int(gold.get(letter, 0)),
         "chosen_share": 100.0 * chosen.get(letter, 0) / total, "gold_share": 100.0 * gold.get(letter, 0) / total,
         "excess": 100.0 * (chosen.get(letter, 0) - gold.get(letter, 0)) / total}
        for letter in letters
    ], columns=["letter", "chosen", "gold", "chosen_share", "gold_share", "excess"])  # no ok reply: no row


def sfr_tier_table(metrics: Mapping[str, float]) -> pd.DataFrame:
    """The silent-failure rate per risk tier and weighted (tier "w") under each convention, from a cell's metrics."""
    return pd.DataFrame([
        {"tier": tier, **{convention: metrics[f"sfr_{tier}_{convention}"] for convention in CONVENTIONS}}
        for tier in (*TIERS, "w")
    ])
