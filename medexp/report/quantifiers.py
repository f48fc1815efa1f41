"""Quantifiers of claim evidence: how a condition met on some of the selected cells decides an item.

Written in a claim file as ``quantifier: <text>``:

* ``all``: every selected cell meets the condition; ``any``: at least one does;
* ``sign_test``: more cells meet it than chance would give (one-sided exact sign test, binomial
  with probability 1/2, at p < 0.05);
* ``at_least K`` / ``at_most K``: at least / at most K cells meet it (K a whole number);
* ``fraction_at_least F`` / ``fraction_at_most F``: at least / at most the share F (0 < F <= 1)
  of the cells meets it, compared exactly (0.9 of 10 cells is 9 cells).

A counting quantifier (the last four) is a statement about a known number of cells, so its item
must state ``expect`` (e.g. 10 replicates): otherwise a half-finished replicate sweep could meet
"at least 9" with 9 of 9 cells, or "at most 1" with none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

WORDS = ("all", "any", "sign_test")
COUNTS = ("at_least", "at_most")
FRACTIONS = ("fraction_at_least", "fraction_at_most")
FORMS = "all, any, sign_test, 'at_least K', 'at_most K', 'fraction_at_least F', 'fraction_at_most F'"
SIGN_TEST_LEVEL = 0.05

_COUNTED = re.compile(r"^(at_least|at_most|fraction_at_least|fraction_at_most)\s+(\S+)$")


class QuantifierError(ValueError):
    """A quantifier that is not one of the allowed forms, or that cannot hold with the expected count."""


@dataclass(frozen=True)
class Quantifier:
    kind: str  # one of WORDS, COUNTS, FRACTIONS
    bound: Fraction | None = None  # K or F of the counting forms

    @classmethod
    def parse(cls, text) -> "Quantifier":
        if not isinstance(text, str):
            raise QuantifierError(f"quantifier {text!r} is not one of {FORMS}")
        text = " ".join(text.split())
        if text in WORDS:
            return cls(text)
        match = _COUNTED.match(text)
        if match is None:
            raise QuantifierError(f"quantifier {text!r} is not one of {FORMS}")
        kind, number = match.groups()
        try:
            bound = Fraction(number)
        except (ValueError, ZeroDivisionError):
            raise QuantifierError(f"quantifier {text!r}: {number!r} is not a number") from None
        if kind in COUNTS and (bound.denominator != 1 or bound < 0):
            raise QuantifierError(f"quantifier {text!r}: K must be a whole number of cells (0 or more)")
        if kind in FRACTIONS and not 0 < bound <= 1:
            raise QuantifierError(f"quantifier {text!r}: F must be a share in (0, 1]")
        return cls(kind, bound)

    @property
    def counting(self) -> bool:
        """True for the forms that count cells, which need the item's ``expect``."""
        return self.bound is not None

    def check_expected(self, expect: int | None) -> None:
        """Refuse a counting quantifier without ``expect``, or one that ``expect`` decides in advance."""
        if not self.counting:
            return
        if expect is None:
            raise QuantifierError(f"quantifier '{self}' counts cells: state how many the selection must match "
                                  "with 'expect' (e.g. expect: 10 for ten replicates)")
        if self.kind == "at_least" and not 0 < self.bound <= expect:
            raise QuantifierError(f"quantifier '{self}' with expect {expect}: K must be between 1 and {expect}")
        if self.kind == "at_most" and self.bound >= expect:
            raise QuantifierError(f"quantifier '{self}' with expect {expect} always holds: K must be below {expect}")

    def holds(self, met: int, cells: int) -> bool:
        """Whether ``met`` of ``cells`` cells meeting the condition satisfies the quantifier."""
        if self.kind == "all":
            return met == cells
        if self.kind == "any":
            return met > 0
        if self.kind == "sign_test":
            return sign_test_p(met, cells) < SIGN_TEST_LEVEL
        needed = self.bound if self.kind in COUNTS else self.bound * cells
        return met >= needed if self.kind.endswith("at_least") else met <= needed

    def describe(self, expect: int | None = None) -> str:
        """The rule in words, e.g. "at least 9 of the 10 expected cells"."""
        of = f"the {expect} expected cells" if expect is not None else "the selected cells"
        if self.kind == "all":
            return "every selected cell" + (f" (expected: {expect})" if expect is not None else "")
        if self.kind == "any":
            return "at least one selected cell" + (f" (expected: {expect})" if expect is not None else "")
        if self.kind == "sign_test":
            return (f"more selected cells than chance (one-sided sign test, p < {SIGN_TEST_LEVEL:g})"
                    + (f" (expected: {expect})" if expect is not None else ""))
        direction = "at least" if self.kind.endswith("at_least") else "at most"
        if self.kind in COUNTS:
            return f"{direction} {self.bound} of {of}"
        return f"{direction} a share {float(self.bound):g} of {of}"

    def __str__(self) -> str:
        return self.kind if self.bound is None else f"{self.kind} {_number(self.bound)}"


def sign_test_p(met: int, cells: int) -> float:
    """One-sided exact sign test that more than half the cells meet a condition (1 for no cells)."""
    from scipy.stats import binomtest

    return float(binomtest(met, cells, 0.5, alternative="greater").pvalue) if cells else 1.0


def _number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"
