"""The translator interface: text fields, the demo's paraphrases, the cache, and the refusal of a
translator that returns its input unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from medexp.benchmarks.base import Example
from medexp.config.schemas import DemoTranslatorConfig
from medexp.probes.keywords import KeywordSource
from medexp.probes.slots import SlotSettings, slot_probes
from medexp.translators import RoundTrip, back_translate, check_changed, example_text, load_translator, unchanged
from medexp.translators.base import CachedTextTranslator

QUESTIONS = ["Is there a lesion in the liver?", "Which organ is shown on this CT?", "How many nodules are there?"]
PARAPHRASES = ["Does the liver show a lesion?", "On this CT, which organ was imaged?", "Count the nodules."]


def demo_examples(with_paraphrase: bool = True) -> list[Example]:
    return [Example(f"demo::test::{i:05d}", i, Path("scan.png"), question, "liver",
                    meta={"caption": f"caption {i}", **({"paraphrase": paraphrase} if with_paraphrase else {})})
            for i, (question, paraphrase) in enumerate(zip(QUESTIONS, PARAPHRASES))]


class Recording(CachedTextTranslator):
    """A translator whose round trip is a visible, deterministic rewrite, counting its calls."""

    def __init__(self, cache_dir, rewrite=lambda text: text.upper() + " (back)", shard_size=2):
        super().__init__("recording", cache_dir, shard_size)
        self.rewrite = rewrite
        self.calls: list[list[str]] = []

    def settings(self):
        return {"kind": "recording"}

    def round_trip(self, texts):
        self.calls.append(list(texts))
        return [(f"pivot:{text}", self.rewrite(text)) for text in texts]


def test_text_fields():
    example = demo_examples()[0]
    assert example_text(example, "question") == QUESTIONS[0]
    assert example_text(example, "answer") == "liver"
    assert example_text(example, "meta.caption") == "caption 0"
    with pytest.raises(ValueError, match=r"has no meta\['report'\]; its meta fields are \['caption', 'paraphrase'\]"):
        example_text(example, "meta.report")
    with pytest.raises(ValueError, match="use 'question', 'answer' or 'meta.<key>'"):
        example_text(example, "caption")


def test_the_demo_translator_reads_the_generators_paraphrase():
    translator = load_translator(OmegaConf.structured(DemoTranslatorConfig(name="demo")), "unused")
    trips = translator.back_translate(demo_examples(), "question")
    assert [(trip.source, trip.back, trip.pivot) for trip in trips] == list(zip(QUESTIONS, PARAPHRASES, [None] * 3))


def test_the_demo_translator_refuses_rows_without_their_round_trip_and_other_fields():
    translator = load_translator(OmegaConf.structured(DemoTranslatorConfig(name="demo")), "unused")
    with pytest.raises(ValueError, match=r"translator=demo reads each round trip from the row: example "
                                         r"demo::test::00000 has no meta\['paraphrase'\]"):
        translator.back_translate(demo_examples(with_paraphrase=False), "question")
    with pytest.raises(ValueError, match="rewrites questions only"):
        translator.back_translate(demo_examples(), "meta.caption")


def test_round_trips_are_cached_and_shared_texts_translated_once(tmp_path):
    items = demo_examples() + demo_examples()[:1]
    first = Recording(tmp_path)
    trips = first.back_translate(items, "question")
    assert trips[0].back == QUESTIONS[0].upper() + " (back)" and trips[0].pivot == f"pivot:{QUESTIONS[0]}"
    assert trips[3] == trips[0]
    assert first.calls == [QUESTIONS[:2], QUESTIONS[2:]]  # three distinct texts, shards of two
    again = Recording(tmp_path)
    assert again.back_translate(items, "question") == trips and again.calls == []
    # other texts are another entry; the first one stays valid
    other = Recording(tmp_path)
    other.back_translate(demo_examples()[1:], "question")
    assert other.calls == [QUESTIONS[1:]]
    assert Recording(tmp_path).back_translate(items, "question") == trips


def test_an_identity_translator_is_refused(tmp_path):
    """A translator returning its input makes the two slot-guessing arms identical."""
    identity = Recording(tmp_path, rewrite=lambda text: text)
    trips = identity.back_translate(demo_examples(), "question")
    assert all(unchanged(trip) for trip in trips)
    with pytest.raises(ValueError, match=r"translator=recording returned 3 of 3 texts unchanged .*would be identical"):
        check_changed(trips, 0.5, identity.name)
    # below the limit, the unchanged items are skipped and counted by the slot prober
    mixed = [RoundTrip("Is the liver big?", "is the LIVER big"), RoundTrip("Is the liver big?", "Is the liver large?")]
    check_changed(mixed, 0.5, "mixed")
    source = KeywordSource(frozenset({"liver"}))
    items = [Example(f"x::{i}", i, None, trip.source, "liver") for i, trip in enumerate(mixed)]
    probes = slot_probes(items, [t.source for t in mixed], [t.back for t in mixed], source, SlotSettings(0))
    assert probes.skip_counts() == {"unchanged": 1} and len(probes.probes) == 2


def test_back_translate_refuses_through_the_config_path():
    unchanged_paraphrases = [Example(e.example_id, e.position, e.image, e.question, e.answer,
                                     meta={"paraphrase": e.question.lower()}) for e in demo_examples()]
    cfg = OmegaConf.structured(DemoTranslatorConfig(name="demo"))
    with pytest.raises(ValueError, match="translator=demo returned 3 of 3 texts unchanged"):
        back_translate(unchanged_paraphrases, cfg, "question", "unused", max_unchanged=0.5)
    assert len(back_translate(demo_examples(), cfg, "question", "unused", max_unchanged=0.0)) == 3


def test_an_unknown_translator_schema_is_named():
    with pytest.raises(ValueError, match="/schema/translator@_here_"):
        load_translator(OmegaConf.create({"name": "google"}), "unused")
