"""Loss tables of differential pairs: what the memorization and membership detectors read.

A pair is a candidate (trained with the canaries) and an independent model (trained without,
from the same initialisation); the pairs are replicates over training seeds. Every model
scores the same examples: the members (canaries) and the non-members (never trained on by
any of them). The loss of an example is the mean negative log-likelihood per answer token of
its gold answer (a classifier's: the cross-entropy of its label); the confidence is the log
probability of the whole answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd


@dataclass
class PairedLosses:
    """Per-example values of the pairs (rows) on the examples (columns, members first or not)."""

    example_ids: list[str]
    member: np.ndarray  # (n,) bool
    classes: np.ndarray  # (n,) class of each example (str)
    class_frequency: np.ndarray  # (n,) the class's share of the benchmark
    candidate_nll: np.ndarray  # (pairs, n)
    independent_nll: np.ndarray  # (pairs, n)
    candidate_logprob: np.ndarray  # (pairs, n)
    independent_logprob: np.ndarray  # (pairs, n)
    pair_labels: list[str]
    reference_logprob: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))  # (references, n)
    reference_labels: list[str] = field(default_factory=list)
    # (references, n): True where the reference model trained on the example (a trained reference's
    # half); all False for references that saw none of the examples. None: all False.
    reference_member: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.example_ids)
        self.member = np.asarray(self.member, dtype=bool)
        self.classes = np.asarray(self.classes, dtype=object).astype(str)
        self.class_frequency = np.asarray(self.class_frequency, dtype=np.float64)
        if self.reference_logprob.size == 0:
            self.reference_logprob = np.empty((0, n))
        if len(set(self.example_ids)) != n:
            raise ValueError("the loss tables repeat example ids")
        for name in ("member", "classes", "class_frequency"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"{name} has shape {getattr(self, name).shape}, expected ({n},)")
        pairs = len(self.pair_labels)
        if pairs < 1:
            raise ValueError("at least one (candidate, independent) pair is needed")
        for name in ("candidate_nll", "independent_nll", "candidate_logprob", "independent_logprob"):
            values = np.asarray(getattr(self, name), dtype=np.float64)
            if values.shape != (pairs, n):
                raise ValueError(f"{name} has shape {values.shape}, expected ({pairs}, {n})")
            bad = int(np.sum(~np.isfinite(values)))
            if bad:
                raise ValueError(f"{bad} values of {name} are NaN or infinite")
            setattr(self, name, values)
        if self.reference_logprob.shape != (len(self.reference_labels), n):
            raise ValueError(f"reference_logprob has shape {self.reference_logprob.shape}, "
                             f"expected ({len(self.reference_labels)}, {n})")
        if self.reference_member is None:
            self.reference_member = np.zeros(self.reference_logprob.shape, dtype=bool)
        self.reference_member = np.asarray(self.reference_member, dtype=bool)
        if self.reference_member.shape != self.reference_logprob.shape:
            raise ValueError(f"reference_member has shape {self.reference_member.shape}, "
                             f"expected {self.reference_logprob.shape}")
        if self.member.all() or not self.member.any():
            raise ValueError(f"members and non-members are both needed, got {int(self.member.sum())} members of {n}")

    @property
    def n_pairs(self) -> int:
        return len(self.pair_labels)

    @property
    def m(self) -> np.ndarray:
        """M(x) = L_ind(x) - L_cand(x) per pair (rows): positive when the candidate fits x better."""
        return self.independent_nll - self.candidate_nll

    @classmethod
    def from_score_tables(
        cls,
        example_ids: Sequence[str],
        member: Sequence[bool],
        classes: Sequence[str],
        class_frequency: Sequence[float],
        pairs: Sequence[tuple[str, pd.DataFrame, pd.DataFrame]],
        references: Sequence[tuple[str, pd.DataFrame, frozenset[str]]] = (),
    ) -> PairedLosses:
        """From score tables (``medexp.scoring.example_scores``): ``pairs`` holds (label,
        candidate table, independent table), ``references`` (label, table, the ids of the
        examples the reference trained on)."""
        ids = list(example_ids)

        def column(table: pd.DataFrame, name: str, what: str) -> np.ndarray:
            indexed = table.set_index("example_id")
            missing = [i for i in ids if i not in indexed.index]
            if missing:
                raise ValueError(f"the scores of {what} lack {len(missing)} examples (first: {missing[0]})")
            return indexed.loc[ids, name].to_numpy(dtype=np.float64)

        def stack(index: int, name: str, sign: float) -> np.ndarray:
            return np.stack([sign * column(pair[index], name, pair[0]) for pair in pairs])

        return cls(
            example_ids=ids,
            member=np.asarray(member, dtype=bool),
            classes=np.asarray(classes, dtype=object),
            class_frequency=np.asarray(class_frequency, dtype=np.float64),
            candidate_nll=stack(1, "mean_logprob", -1.0),
            independent_nll=stack(2, "mean_logprob", -1.0),
            candidate_logprob=stack(1, "sum_logprob", 1.0),
            independent_logprob=stack(2, "sum_logprob", 1.0),
            pair_labels=[pair[0] for pair in pairs],
            reference_logprob=(np.stack([column(table, "sum_logprob", label) for label, table, _ in references])
                               if references else np.empty((0, len(ids)))),
            reference_labels=[label for label, _, _ in references],
            reference_member=np.array([[i in seen for i in ids] for _, _, seen in references], dtype=bool).reshape(
                len(references), len(ids)),
        )


def metric_key(text: str) -> str:
    """A class name usable in an MLflow metric key (letters, digits, _ - . / and spaces)."""
    return re.sub(r"[^0-9A-Za-z_\-. /]", "_", str(text)).strip() or "_"
