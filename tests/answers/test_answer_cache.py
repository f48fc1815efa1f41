"""Response tables through the verified shard cache: reuse, error rows asked again, content keys."""

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
                rows.append(response_row(probe, "", None, Status.error, error="HTTP 503"))
            else:
                rows.append(response_row(probe, "B", "B", Status.ok, option_logliks=[-2.0, -0.5, -3.0, -4.0]))
        return response_table(rows, [probe.probe_id for probe in chunk])


def test_cached_responses_are_reused_with_their_types(tmp_path):
    probes = _probes(tmp_path)
    answerer = Answerer()
    first = cached_answers({"model": "m"}, probes, tmp_path / "cache", answerer, retry_errors=True, desc="t")
    again = cached_answers({"model": "m"}, probes, tmp_path / "cache", answerer, retry_errors=True, desc="t")
    assert answerer.asked == [f"ex{k}" for k in range(5)]  # asked once
    assert again["correct"].tolist() == [True] * 5 and again["correct"].dtype == bool
    assert list(again["option_logliks"][0]) == [-2.0, -0.5, -3.0, -4.0]
    assert again["error"].tolist() == [None] * 5 and first["probe_id"].tolist() == again["probe_id"].tolist()


def test_error_rows_are_asked_again_only_when_told(tmp_path):
    probes = _probes(tmp_path)
    flaky = Answerer(failing={"ex3"})
    first = cached_answers({"model": "m"}, probes, tmp_path / "cache", flaky, retry_errors=True, desc="t")
    assert first["status"].tolist().count(Status.error.value) == 1
    recovered = Answerer()
    second = cached_answers({"model": "m"}, probes, tmp_path / "cache", recovered, retry_errors=True, desc="t")
    assert recovered.asked == [f"ex{k}" for k in range(5)]  # the shard holding the error is asked again
    assert (second["status"] == Status.ok.value).all()
    # A white-box model's error is deterministic: kept, not recomputed.
    kept = Answerer()
    cached_answers({"model": "w"}, probes, tmp_path / "cache2", Answerer(failing={"ex3"}), retry_errors=False, desc="t")
    cached_answers({"model": "w"}, probes, tmp_path / "cache2", kept, retry_errors=False, desc="t")
    assert kept.asked == []


def test_a_replaced_image_is_another_probe_set(tmp_path):
    probes = _probes(tmp_path)
    before = probe_set_hash(probes, tmp_path / "cache")
    assert probe_set_hash(probes, tmp_path / "cache") == before
    write_png(tmp_path / "2.png", seed=99)  # same path, new bytes
    assert probe_set_hash(probes, tmp_path / "cache") != before
