"""Back-translation for slot guessing: each text goes English -> pivot -> English.

A translator is chosen by a ``conf/translator/*.yaml`` file composed into a detector
(``translator@detector.translator=marian``). Its own sub-package, like the image embedders,
because it is a concern of its own: a model family to load (Marian MT through transformers),
a cache of its outputs (content-addressed through :mod:`medexp.kernel.shards`) and an offline stand-in
for the demo benchmark.

- :mod:`medexp.translators.base`: the interface, the cache, the reading of a text field and the
  refusal of a translator that leaves texts unchanged;
- :mod:`medexp.translators.load`: the table of translators by schema name, and back-translation;
- :mod:`medexp.translators.marian`: Marian MT (Helsinki-NLP opus-mt models, hub or local copy);
- :mod:`medexp.translators.demo`: the demo benchmark's paraphrases (``meta["paraphrase"]``).
"""

from medexp.translators.base import RoundTrip, Translator, check_changed, example_text, unchanged
from medexp.translators.load import back_translate, load_translator

__all__ = ["RoundTrip", "Translator", "back_translate", "check_changed", "example_text", "load_translator", "unchanged"]
