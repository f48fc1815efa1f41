"""Response tables through the verified shard cache: reuse, only the probes without an answer asked
again, content keys."""

from __future__ import annotations

from medexp.answers.cache import cached_answers, probe_set_hash
from medexp.answers.table import Status, response_row, response_table
from tests.answers.conftest import choice_probe, write_png


def _probes(tmp_path, n=5):
    return [choice_probe(f"ex{k}", image=write_png(tmp_path / f"{k}.png", seed=k)) for k in range(n)]


class Answerer:
    """Answers "B" (the gold) with per-logliks; the probes named in ``failing`` come back as errors."""

    def __init__(self, failing=()):
        self.failing = set(failing)
        self.asked: list[str] = []

    def __call__(self, chunk):
        rows = []
        for probe in chunk:
            self.asked.append(probe.example_id)
            if probe.example_id in self.failing:
                rows.append(response_row(probe, "", None, Status.error, error="HTTP 503", cause="http_5xx"))
            else:
                rows.append(response_row(probe, "B", "B", Status.ok, option_logliks=[-2.0, -0.5, -3.0, -4.0]))
        return response_table(rows, [probe.probe_id for probe in chunk])


def test_cached_responses_are_reused_with_their_types(tmp_path):
    probes = _probes(tmp_path)
    answerer = Answerer()
    first = cached_answers({"model": "m"}, probes, tmp_path / "cache", answerer, desc="t")
    again = cached_answers({"model": "m"}, probes, tmp_path / "cache", answerer, desc="t")
    assert answerer.asked == [f"ex{k}" for k in range(5)]  # asked once
    assert again["choice"].tolist() == ["B"] * 5 and again["status"].tolist() == ["ok"] * 5
    assert list(again["option_logliks"][0]) == [-2.0, -0.5, -3.0, -4.0]
    assert again["error"].tolist() == [None] * 5 and first["probe_id"].tolist() == again["probe_id"].tolist()


def test_only_the_probes_without_an_answer_are_asked_again(tmp_path, monkeypatch):
    import medexp.answers.cache as cache

    monkeypatch.setattr(cache, "PROBE_SHARD", 3)  # two shards: ex0..ex2, ex3..ex4
    probes = _probes(tmp_path)
    flaky = Answerer(failing={"ex1", "ex3"})
    first = cached_answers({"model": "m"}, probes, tmp_path / "cache", flaky, desc="t")
    assert first["status"].tolist().count(Status.error.value) == 2
    assert first.loc[first["status"] == "error", "error_cause"].tolist() == ["http_5xx"] * 2
    recovered = Answerer()
    second = cached_answers({"model": "m"}, probes, tmp_path / "cache", recovered, desc="t")
    assert recovered.asked == ["ex1", "ex3"]  # exactly the failed probes, not their shards
    assert (second["status"] == Status.ok.value).all() and second["probe_id"].tolist() == first["probe_id"].tolist()
    assert list(second["option_logliks"][1]) == [-2.0, -0.5, -3.0, -4.0]
    again = Answerer()
    third = cached_answers({"model": "m"}, probes, tmp_path / "cache", again, desc="t")
    assert again.asked == [] and third.equals(second)  # now every probe has its answer


def test_a_replaced_image_is_another_probe_set(tmp_path):
    probes = _probes(tmp_path)
    before = probe_set_hash(probes, tmp_path / "cache")
    assert probe_set_hash(probes, tmp_path / "cache") == before
    write_png(tmp_path / "2.png", seed=99)  # same path, new bytes
    assert probe_set_hash(probes, tmp_path / "cache") != before
