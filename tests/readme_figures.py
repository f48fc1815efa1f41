"""The figures the README shows from demo commands, read from its text: the checks that produce
each figure compare their output with these (docs/testing.md lists which check covers which)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _one(pattern: str, what: str) -> re.Match:
    match = re.search(pattern, _readme(), re.M | re.S)
    assert match, f"the README's {what} is missing or reworded (tests/readme_figures.py reads it)"
    return match


def quick_start_p_value() -> str:
    """The p-value the README's first-command output block shows (what every machine must print)."""
    return _one(r"^model=demo_leaky,bench=demo,detector=exch,control=none  p_value=(\S+)  flag=",
                "quick-start output block").group(1)


def demo_grid_cells() -> int:
    """The number of cells the README gives ``experiment=demo_grid``."""
    return int(_one(r"experiment=demo_grid hydra/launcher=joblib\s+# the offline demo audit: (\d+) cells",
                    "demo grid comment").group(1))


def power_figures() -> dict[str, str]:
    """``python -m medexp.power bench=demo detector=option_order effect=0.05``'s MDE (accuracy
    points), the demo's items and the items 5 points need, as the README writes them."""
    match = _one(r"here ([\d.]+) accuracy points on the demo's ([\d,]+) items, and ([\d,]+) items\s+for 5 points",
                 "power sentence")
    return {"mde_points": match.group(1), "items": match.group(2), "items_for_5_points": match.group(3)}


def membership_figures() -> dict[str, str]:
    """``detector=membership_references`` on the demo: the candidate's RMIA AUC and the range of
    the references' AUCs, each attacked the same way, as the README writes them."""
    match = _one(r"RMIA reaches AUC ([\d.]+) on the shipped candidate and ([\d.]+)-([\d.]+) on the\s+references",
                 "membership sentence")
    return {"rmia_auc": match.group(1), "reference_min": match.group(2), "reference_max": match.group(3)}
