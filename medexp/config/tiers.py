"""Clinical risk tiers L1-L5 (MedVIGIL's CRT), from a release column or a config mapping.

L1 modality or meta question (no harm if wrong), L2 anatomical localisation, L3 presence of a
finding, L4 significant pathology or characterisation, L5 time-critical "don't miss" finding.
MedVIGIL's clinicians label each case; for another benchmark a config maps meta fields to tiers,
for example ``{"content_type": {"Modality": "L1", "Organ": "L2", "Abnormality": "L3"}}``.
"""

from __future__ import annotations

from typing import Any, Mapping

TIERS: tuple[str, ...] = ("L1", "L2", "L3", "L4", "L5")


def check_tier(value: Any, where: str) -> str:
    """``value`` as a tier name, or an error naming ``where`` and the allowed names."""
    tier = str(value).strip().upper() if value is not None else ""
    if tier not in TIERS:
        raise ValueError(f"{where}: risk tier {value!r} is not one of {list(TIERS)}")
    return tier


def risk_tier(meta: Mapping[str, Any], mapping: Mapping[str, Mapping[str, Any]], where: str = "example") -> str:
    """The tier that ``mapping`` (meta field -> value -> tier) gives ``meta``.

    With several fields the highest tier wins: a question is as risky as its riskiest facet.
    A field absent from ``meta``, or a value the mapping does not list, is an error naming both.
    """
    if not mapping:
        raise ValueError("risk tier mapping is empty: map at least one meta field to tiers, "
                         "e.g. {content_type: {Modality: L1, Abnormality: L3}}")
    tiers = []
    for field, values in mapping.items():
        if field not in meta:
            raise ValueError(f"{where}: meta has no field {field!r} for the risk-tier mapping (has {sorted(meta)})")
        value = meta[field]
        if value not in values:
            raise ValueError(f"{where}: {field}={value!r} has no risk tier in the mapping; "
                             f"mapped values: {sorted(map(str, values))}")
        tiers.append(check_tier(values[value], f"risk-tier mapping {field}.{value}"))
    return max(tiers, key=TIERS.index)
