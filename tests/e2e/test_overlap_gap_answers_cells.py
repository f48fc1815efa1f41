"""The audit's chain end to end on a small offline demo: image_nn's flags (the demo corpus's planted
near-duplicates, perceptual hash, no weights) feed overlap_gap_answers, whose model is a scripted
OpenAI-compatible server, through ``run_cell`` exactly as ``python -m medexp`` runs it, and the same
probes exported for a harness (``python -m medexp.export``), answered outside medexp and imported
(``model=responses``).

The server has "memorised" the questions of the test images that have a planted copy in the corpus
(it answers them right) and answers every other question wrong; an honest server, the baseline,
answers everything right. The gap, its counts and its MDE are checked against the flags of a plain
image_nn cell and hand counts; then one planted corpus copy is overwritten, and the gap cell, whose
settings did not change, is computed again with the new flags instead of reusing its run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from medexp.config import compose
from medexp.export import main as export_main
from medexp.runner.cell_run import run_cell
from tests.answers.server import ChatServer, option_texts
from tests.detectors.test_overlap_gap import _mde

HARNESS = Path(__file__).resolve().parents[1] / "harness"

pytestmark = pytest.mark.slow  # about 30 s on 2 busy cores: the small demo and its corpus are generated and hashed

N_TEST = 40
SMALL_DEMO = [f"bench.demo.n_test={N_TEST}", "bench.demo.n_train=40", "bench.demo.n_heldout=10"]


def _corpus(prefix: str) -> list[str]:
    """A small demo corpus (12 planted copies among 172 images) at ``prefix`` (an image_nn config)."""
    source = f"{prefix}.corpus.source"
    return [f"{source}.demo.n_test={N_TEST}", f"{source}.demo.n_train=40", f"{source}.demo_corpus.n_distractors=150",
            f"{source}.demo_corpus.n_planted=12", f"{source}.demo_corpus.n_ood=10", f"{prefix}.max_panels=0"]


@pytest.fixture()
def demo(tmp_path):
    uri, cache = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "cache"

    def cell(*overrides):
        outcome = run_cell(compose([f"tracking.uri={uri}", f"paths.cache_dir={cache}", *SMALL_DEMO, *overrides]))
        assert outcome.status in ("FINISHED", "CACHED"), outcome.error
        return outcome

    def flags_of_image_nn() -> dict[str, bool]:
        """The flags of a plain image_nn cell on the same corpus (its questions table)."""
        outcome = cell("detector=image_nn", "model=none", *_corpus("detector"))
        path = MlflowClient(uri).download_artifacts(outcome.run_id, "questions.parquet", str(tmp_path))
        table = pd.read_parquet(path)
        return dict(zip(table["example_id"], table["flagged"].astype(bool)))

    cell.uri, cell.cache, cell.flags_of_image_nn = uri, cache, flags_of_image_nn
    return cell


def _planted_corpus_rows(cache):
    from medexp.images.audit import load_corpus

    corpus_cfg = compose([*SMALL_DEMO, "detector=overlap_gap_answers", *_corpus("detector.flags.image_nn")])
    corpus = load_corpus(corpus_cfg.detector.flags.image_nn.corpus, cache)
    return [row for row in corpus.examples if row.meta.get("duplicate_of")], \
        [row for row in corpus.examples if not row.meta.get("duplicate_of") and row.image is not None]


def _server_rules(cache, memorised_ids: set[str]):
    """A memorising rule (right on ``memorised_ids``, wrong elsewhere) and an honest one (always right)."""
    from medexp.benchmarks import load_benchmark_from_config

    bench = load_benchmark_from_config(compose(SMALL_DEMO).bench, cache)
    gold = {example.question: (example.answer, example.example_id in memorised_ids) for example in bench.examples}

    def memorising(prompt: str, body: dict) -> str:
        answer, memorised = gold[prompt.split("\nOptions:")[0]]
        return next(letter for letter, text in option_texts(prompt).items() if (text == answer) == memorised)

    def honest(prompt: str, body: dict) -> str:
        answer, _ = gold[prompt.split("\nOptions:")[0]]
        return next(letter for letter, text in option_texts(prompt).items() if text == answer)

    return memorising, honest


def _served(server, name: str) -> list[str]:
    return ["model=openai_compatible", f"model.name={name}", f"model.base_url={server.base_url}",
            "model.max_retries=0"]


def test_image_nn_flags_feed_the_answer_gap_of_a_served_and_an_imported_model_and_new_flags_are_never_stale(demo):
    flags = demo.flags_of_image_nn()
    planted, distractors = _planted_corpus_rows(demo.cache)
    memorised = {f"demo::{row.meta['duplicate_of']}" for row in planted}
    assert len(memorised) == 12 and all(flags[example_id] for example_id in memorised)  # every copy is found
    memorising, honest = _server_rules(demo.cache, memorised)
    with ChatServer(answer=memorising) as server, ChatServer(answer=honest) as clean:
        baseline = f"'openai_compatible name=honest base_url={clean.base_url} max_retries=0'"
        detector = ["detector=overlap_gap_answers", *_corpus("detector.flags.image_nn"), f"detector.baseline={baseline}",
                    "detector.n_permutations=2000", "detector.n_resamples=500"]
        gap_cell = [*detector, *_served(server, "memoriser")]
        first = demo(*gap_cell)
        assert first.cell_key == "model=memoriser,bench=demo,detector=overlap_gap_answers-image_nn-phash-demo,control=none"

        def expected(flags: dict[str, bool]) -> dict[str, float]:
            flagged = np.array([flags[f"demo::test::{i:05d}"] for i in range(N_TEST)])
            right = np.array([f"demo::test::{i:05d}" in memorised for i in range(N_TEST)])
            return {"n_flagged_images": flagged.sum(), "mean_flagged": right[flagged].mean(),
                    "mean_unflagged": right[~flagged].mean(), "gap": right[flagged].mean() - right[~flagged].mean()}

        metrics, hand = first.metrics, expected(flags)
        for name, value in hand.items():
            assert metrics[name] == pytest.approx(value), name
        assert metrics["flags_n_images_flagged"] == hand["n_flagged_images"] and metrics["n_images"] == N_TEST
        assert metrics["p_value"] < 0.01 and metrics["flag"] == 1.0
        # the honest baseline is right everywhere: its gap is 0, so the difference is the whole gap
        assert metrics["baseline_gap"] == 0.0 and metrics["gap_minus_baseline"] == pytest.approx(hand["gap"])
        n_flagged = int(hand["n_flagged_images"])
        assert metrics["mde"] == pytest.approx(_mde(n_flagged, N_TEST - n_flagged, 0.01), rel=1e-6)
        assert metrics["underpowered"] == (metrics["mde"] > 0.8)
        assert metrics["n_answered"] == N_TEST and metrics["baseline.n_answered"] == N_TEST
        asked = len(server.requests)
        assert asked == N_TEST

        # The same probes exported for a harness, answered outside medexp through the same server
        # and imported (model=responses): the same gap, interval, p-value and MDE
        root, out = server.base_url.removesuffix("/v1"), demo.cache.parent / "export"
        assert export_main([f"paths.cache_dir={demo.cache}", *SMALL_DEMO, *detector, "format=openai_batch",
                            f"out={out}", "model_id=memoriser"]) == 0
        subprocess.run([sys.executable, HARNESS / "answer_batch.py", out / "requests.jsonl", root,
                        out / "output.jsonl"], check=True, timeout=300)
        imported = demo("model=responses", "model.name=memoriser", "model.responses_format=openai_batch",
                        f"model.responses_path={out / 'output.jsonl'}", *detector)
        assert imported.status == "FINISHED" and imported.run_id != first.run_id
        for name in ("gap", "gap_ci_low", "gap_ci_high", "p_value", "mde", "mde_gap", "underpowered",
                     "gap_minus_baseline", "flags_n_images_flagged", "n_answered"):
            assert imported.metrics[name] == metrics[name], name
        asked = len(server.requests)

        # One planted copy becomes a distractor's bytes: its test image loses its near-duplicate. The
        # gap cell's settings are unchanged; only its flags are not.
        lost = planted[0]
        lost.image.write_bytes(distractors[0].image.read_bytes())
        new_flags = demo.flags_of_image_nn()
        assert not new_flags[f"demo::{lost.meta['duplicate_of']}"]
        second = demo(*gap_cell)
        assert second.status == "FINISHED" and second.run_id != first.run_id  # computed again, not reused
        hand = expected(new_flags)
        assert second.metrics["flags_n_images_flagged"] == hand["n_flagged_images"] == n_flagged - 1
        assert second.metrics["gap"] == pytest.approx(hand["gap"])
        assert len(server.requests) == asked  # the answers did not change: they come from the response cache
        assert demo(*gap_cell).status == "CACHED"  # the same flags again: the tracked run stands
