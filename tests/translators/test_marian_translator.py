"""The Marian translator on tiny random-weight checkpoints: real loading, deterministic decoding,
a verified resumable cache, clear errors offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from medexp.benchmarks.base import Example
from medexp.config.schemas import MarianDirection, MarianTranslatorConfig
from medexp.translators import back_translate, load_translator
from medexp.translators.marian import MarianTranslator
from tests.translators.tiny_marian import ENGLISH, LANGUAGE_TOKEN, build_pair


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return build_pair(tmp_path_factory.mktemp("marian"))


def config(forward: Path | str, backward: Path | str, prefix: str | None = LANGUAGE_TOKEN, **changes):
    values = dict(name="marian", forward=MarianDirection(model=str(forward), prefix=prefix),
                  backward=MarianDirection(model=str(backward)), batch_size=2, max_length=12, num_beams=1,
                  device="cpu", shard_size=2)
    values.update(changes)
    return OmegaConf.structured(MarianTranslatorConfig(**values))


def examples(texts=ENGLISH) -> list[Example]:
    return [Example(f"tiny::test::{i}", i, None, text, "yes") for i, text in enumerate(texts)]


def test_round_trip_through_both_directions_is_deterministic(checkpoints, tmp_path, one_torch_thread):
    forward, backward = checkpoints
    items = examples() + examples([ENGLISH[0]])  # a repeated text is translated once
    translator = load_translator(config(forward, backward), tmp_path / "a")
    assert isinstance(translator, MarianTranslator)
    trips = translator.back_translate(items, "question")
    assert [trip.source for trip in trips] == [item.question for item in items]
    assert all(isinstance(trip.pivot, str) and isinstance(trip.back, str) for trip in trips)
    assert trips[-1] == trips[0]
    # a fresh translator with an empty cache decodes the same strings
    fresh = load_translator(config(forward, backward), tmp_path / "b").back_translate(items, "question")
    assert fresh == trips
    # greedy and beam search are both deterministic
    beams = load_translator(config(forward, backward, num_beams=3), tmp_path / "c")
    assert beams.back_translate(items, "question") == beams.back_translate(items, "question")


def test_a_complete_cache_entry_loads_no_model(checkpoints, tmp_path, one_torch_thread):
    forward, backward = checkpoints
    first = load_translator(config(forward, backward), tmp_path)
    trips = first.back_translate(examples(), "question")
    entries = [path for path in (tmp_path / "translations").iterdir() if path.is_dir()]
    assert len(entries) == 1 and (entries[0] / "complete.json").is_file()
    assert len(list(entries[0].glob("shard-*.parquet"))) == 3  # six texts, two per shard
    again = load_translator(config(forward, backward), tmp_path)
    assert again.back_translate(examples(), "question") == trips
    assert again._loaded == {}  # read from the cache: nothing was loaded
    key = json.loads((entries[0] / "key.json").read_text())
    assert key["translator"]["forward"]["weights"] and key["translator"]["forward"]["prefix"] == LANGUAGE_TOKEN


def test_a_changed_shard_is_recomputed(checkpoints, tmp_path, one_torch_thread):
    forward, backward = checkpoints
    trips = load_translator(config(forward, backward), tmp_path).back_translate(examples(), "question")
    entry = next(path for path in (tmp_path / "translations").iterdir() if path.is_dir())
    shard = sorted(entry.glob("shard-*.parquet"))[1]
    shard.write_bytes(b"not parquet")
    again = load_translator(config(forward, backward), tmp_path)
    assert again.back_translate(examples(), "question") == trips
    assert set(again._loaded) == {"forward", "backward"}  # the bad shard was translated again


def test_settings_that_change_a_translation_change_the_cache_key(checkpoints, tmp_path):
    forward, backward = checkpoints
    base = load_translator(config(forward, backward), tmp_path).settings()
    assert load_translator(config(forward, backward, num_beams=2), tmp_path).settings() != base
    assert load_translator(config(forward, backward, max_length=20), tmp_path).settings() != base
    assert load_translator(config(forward, backward, prefix=None), tmp_path).settings() != base
    # batch size and device do not change what is decoded
    assert load_translator(config(forward, backward, batch_size=5), tmp_path).settings() == base


def test_replaced_weights_change_the_key(checkpoints, tmp_path):
    forward, backward = checkpoints
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in forward.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    before = load_translator(config(copy, backward), tmp_path).settings()
    (copy / "generation_config.json").write_text('{"max_length": 8}')
    assert load_translator(config(copy, backward), tmp_path).settings() != before


def test_an_unknown_language_token_is_refused_with_the_known_ones(checkpoints, tmp_path):
    forward, backward = checkpoints
    translator = load_translator(config(forward, backward, prefix=">>fra<<"), tmp_path)
    with pytest.raises(ValueError, match=r"translator.forward.prefix='>>fra<<' is not a target-language token .* "
                                         r"knows \['>>cmn_Hans<<'\]"):
        translator.back_translate(examples(), "question")
    swapped = load_translator(config(backward, forward, prefix=LANGUAGE_TOKEN), tmp_path)
    with pytest.raises(ValueError, match="has no target-language tokens; set the prefix to null"):
        swapped.back_translate(examples(), "question")


def test_a_missing_directory_is_named(checkpoints, tmp_path):
    _, backward = checkpoints
    translator = load_translator(config(tmp_path / "nowhere", backward), tmp_path)
    with pytest.raises(FileNotFoundError, match="translator.forward.model=.*nowhere.*no such directory"):
        translator.back_translate(examples(), "question")


def test_a_folder_without_a_checkpoint_is_named(checkpoints, tmp_path):
    _, backward = checkpoints
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(OSError, match="does not hold a Marian checkpoint"):
        load_translator(config(empty, backward), tmp_path).back_translate(examples(), "question")


def test_without_the_hub_the_error_says_what_to_download_and_where_to_point(checkpoints, tmp_path, monkeypatch):
    _, backward = checkpoints
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    translator = load_translator(config("Helsinki-NLP/opus-mt-en-zh", backward), tmp_path)
    with pytest.raises(OSError) as raised:
        translator.back_translate(examples(), "question")
    message = str(raised.value)
    assert "huggingface-cli download Helsinki-NLP/opus-mt-en-zh --local-dir <dir>" in message
    assert "detector.translator.forward.model=<dir>" in message


def test_the_default_marian_config_translates_english_to_chinese_and_back():
    cfg = MarianTranslatorConfig(name="marian")
    assert (cfg.forward.model, cfg.forward.prefix) == ("Helsinki-NLP/opus-mt-en-zh", LANGUAGE_TOKEN)
    assert (cfg.backward.model, cfg.backward.prefix) == ("Helsinki-NLP/opus-mt-zh-en", None)


def test_back_translate_applies_the_unchanged_guard(checkpoints, tmp_path, one_torch_thread):
    forward, backward = checkpoints
    trips = back_translate(examples(), config(forward, backward), "question", tmp_path, max_unchanged=0.5)
    assert len(trips) == len(ENGLISH)
