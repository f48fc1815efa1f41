"""Answer options as benchmarks write them: the letters that label options in displayed order
(A, B, ...) and the form in which two option texts are compared."""

from __future__ import annotations

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def normalise(text: str) -> str:
    """Case- and whitespace-insensitive form used to compare option texts."""
    return " ".join(str(text).split()).casefold()
