"""An offline translator that reads each question's round trip from its row.

``meta[meta_field]`` (default ``paraphrase``) holds the question after English -> pivot ->
English, made elsewhere: back-translations shipped as a column of a ``bench=local`` file, or a
generator's rewriting of its question in another template (same slot values, same answer). It
plays the part of a translation model on a machine without one. A row without the field fails
with a message naming translator=marian.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medexp.translators.base import RoundTrip, Translator, example_text


class DemoTranslator(Translator):
    def __init__(self, cfg, cache_dir: str | Path | None = None):
        # cache_dir: unused, the rows carry their round trips (the signature every translator shares)
        self.name = cfg.name
        self.meta_field = cfg.meta_field

    def back_translate(self, examples: Sequence, field: str) -> list[RoundTrip]:
        if field != "question":
            raise ValueError(f"translator={self.name} rewrites questions only (meta[{self.meta_field!r}] is the "
                             f"question in another template); set the detector's text_field=question, not {field!r}")
        trips = []
        for example in examples:
            paraphrase = example.meta.get(self.meta_field)
            if not isinstance(paraphrase, str) or not paraphrase.strip():
                raise ValueError(
                    f"translator={self.name} reads each round trip from the row: example {example.example_id} "
                    f"has no meta[{self.meta_field!r}] (the demo generator's rewriting of its question, or a "
                    "column of back-translations in a local file). Otherwise use translator=marian")
            trips.append(RoundTrip(example_text(example, field), paraphrase))
        return trips
