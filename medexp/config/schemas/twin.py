"""Schema of a benchmark's perturbed twin (the ``twin:`` section of a conf/bench/ file).

Paired semantic perturbation (Park et al. 2025) keeps an item's question and image composition
and changes the visual evidence so that the answer changes. The twin set is itself a benchmark:
another split or file of this one, or another bench config; this section says where it is and how
its items pair with the originals.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional


class PairBy(str, Enum):
    # A twin shares its original's upstream id (the VLMEvalKit ``index`` column, a local ``id``).
    shared_id = "shared_id"
    # A twin names its original's upstream id in a meta field (``source_id_field``).
    source_id_field = "source_id_field"


@dataclass
class TwinConfig:
    # Where the twins are: a bench config (conf/bench/<bench>.yaml; None: this bench's own config)
    # with, optionally, another split, root or TSV file than that config's.
    bench: Optional[str] = None
    split: Optional[str] = None
    root: Optional[str] = None
    tsv_file: Optional[str] = None
    pair_by: PairBy = PairBy.shared_id
    source_id_field: Optional[str] = None  # pair_by=source_id_field: the twin's meta field naming its original
    # The method changes the evidence so that the answer changes: a pair whose gold answers are
    # the same (after normalisation) is an error naming the ids.
    answers_must_differ: bool = True
    # Originals without a twin (the published twins cover the items that survived manual
    # filtering) are counted and logged; true makes a missing twin an error instead.
    require_every_original: bool = False

    @staticmethod
    def check_values(node, path: str) -> str | None:
        if not any(node.get(key) is not None for key in ("bench", "split", "root", "tsv_file")):
            return (f"{path}: say where the twins are: {path}.bench (a conf/bench name), {path}.split, "
                    f"{path}.root or {path}.tsv_file (otherwise the twin would be the benchmark itself)")
        by_field = PairBy(node.pair_by) is PairBy.source_id_field
        if by_field and not node.get("source_id_field"):
            return f"{path}.pair_by=source_id_field needs {path}.source_id_field (the twin's meta field naming its original)"
        if not by_field and node.get("source_id_field"):
            return f"{path}.source_id_field is read only with {path}.pair_by=source_id_field (pair_by is {node.pair_by})"
        return None
