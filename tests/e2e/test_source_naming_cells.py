"""``source_naming`` cells end to end without a trained model: a local benchmark with a test split
(audited) and a heldout split (control), answered by a scripted OpenAI-compatible server on
127.0.0.1, through ``run_cell`` exactly as ``python -m medexp`` runs it.

The test split is mostly CT, the heldout split mostly MRI. A *leaky* server names the benchmark on
the images it was shown (the test split's, recognised byte for byte) and "None of these" otherwise;
a server with a *habit* names the benchmark on every CT, whichever split it comes from.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from medexp.answers.prompt import image_data_url
from medexp.config import compose
from medexp.config.wording import DEMO_SOURCES
from medexp.runner.cell_run import run_cell
from tests.answers.conftest import write_png
from tests.answers.server import ChatServer, option_texts

MODALITIES = {"test": ["CT"] * 15 + ["MRI"] * 5, "heldout": ["CT"] * 5 + ["MRI"] * 15}


def _write_bench(root: Path) -> dict[str, tuple[str, str]]:
    """Both splits' rows and images; each image's data URL -> (split, modality)."""
    (root / "images").mkdir(parents=True)
    seen = {}
    for split_index, (split, modalities) in enumerate(MODALITIES.items()):
        rows = []
        for index, modality in enumerate(modalities):
            image = write_png(root / "images" / f"{split}_{index}.png", seed=1000 * split_index + index)
            rows.append({"id": f"{split}{index}", "image": f"images/{image.name}", "question": "What is shown?",
                         "answer": "a scan", "modality": modality})
            seen[image_data_url(image)] = (split, modality)
        (root / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return seen


def _naming(seen: dict[str, tuple[str, str]], names_benchmark: Callable[[str, str], bool]) -> Callable:
    """A server rule: the benchmark's letter when ``names_benchmark(split, modality)``, else "None of these"'s."""
    def rule(prompt: str, body: dict) -> str:
        url = next(part["image_url"]["url"] for message in body["messages"] if isinstance(message["content"], list)
                   for part in message["content"] if part.get("type") == "image_url")
        letters = {text: letter for letter, text in option_texts(prompt).items()}
        return letters[DEMO_SOURCES[0] if names_benchmark(*seen[url]) else DEMO_SOURCES[2]]

    return rule


@pytest.fixture()
def local_cell(tmp_path):
    root = tmp_path / "bench"
    seen = _write_bench(root)

    def cell(names_benchmark, name):
        with ChatServer(answer=_naming(seen, names_benchmark)) as server:
            cfg = compose([f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", f"paths.cache_dir={tmp_path / 'cache'}",
                           "bench=local", "bench.name=sources_local", f"bench.root={root}",
                           "detector=source_naming_demo", "model=openai_compatible", f"model.name={name}",
                           f"model.base_url={server.base_url}", "model.max_retries=0"])
            outcome = run_cell(cfg)
        assert outcome.status == "FINISHED", outcome.error
        return outcome.metrics

    return cell


def test_a_server_naming_the_benchmark_on_its_own_images_is_flagged_and_a_modality_habit_is_not(local_cell):
    leaky = local_cell(lambda split, modality: split == "test", "leaky")
    # every test image named the benchmark, no heldout image: CT 15 of 15 against 0 of 5, MRI 5 of 5
    # against 0 of 15; exact p = 1 / (C(20, 15) C(20, 5)) (the only table as extreme)
    assert (leaky["rate_audited"], leaky["rate_control"], leaky["mh_difference"]) == (1.0, 0.0, 1.0)
    assert leaky["p_value"] == pytest.approx(1 / (15504 * 15504)) and leaky["flag"] == 1.0
    assert leaky["accuracy_audited"] == leaky["accuracy_control"] == 1.0 and leaky["n_strata"] == 2
    habit = local_cell(lambda split, modality: modality == "CT", "habit")
    # raw rates 15/20 against 5/20, but within each modality both splits are named alike
    assert (habit["rate_audited"], habit["rate_control"]) == (0.75, 0.25)
    assert habit["mh_difference"] == 0.0 and habit["p_value"] == pytest.approx(1.0) and habit["flag"] == 0.0
    assert habit["n_error_audited"] == habit["n_error_control"] == 0.0
