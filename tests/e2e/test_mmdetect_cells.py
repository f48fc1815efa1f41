"""MM-Detect's cells end to end without a trained model: a local multiple-choice benchmark (the
``bench=local`` layout with ``options``), answered by a scripted OpenAI-compatible server on
127.0.0.1 and by imported responses, through ``run_cell`` exactly as ``python -m medexp`` runs it.

The scripted servers have known behaviour: a *memorising* server answers each question with the
letter its gold had in the released order (and answers without the image); an *honest* one
answers with the letter of the gold text wherever it sits, and refuses without an image.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from medexp.benchmarks.options import LETTERS
from medexp.stats.sample_size import paired_accuracy_mde
from medexp.config import compose
from medexp.config.wording import DEFAULT_MASK
from medexp.runner.cell_run import run_cell
from tests.answers.conftest import write_png
from tests.answers.server import ChatServer, option_texts

N_EXAMPLES = 40
ANSWERS = ["pneumonia", "pleural effusion", "cardiomegaly", "normal", "fracture", "nodule"]


def _write_bench(root: Path) -> dict[str, dict]:
    """``root/test.jsonl`` of N_EXAMPLES four-option questions (gold at a seeded canonical letter)."""
    rng = np.random.default_rng(5)
    (root / "images").mkdir(parents=True)
    rows, by_question = [], {}
    for index in range(N_EXAMPLES):
        options = [str(text) for text in rng.choice(ANSWERS, 4, replace=False)]
        gold = options[int(rng.integers(4))]
        question = f"Case {index}: which finding, {options[0]} or {options[1]}, does this radiograph show?"
        # its round trip through a translator, made elsewhere and shipped with the row (meta)
        paraphrase = f"In case {index}, does the radiograph show {options[0]} or {options[1]}?"
        write_png(root / "images" / f"{index}.png", seed=index)
        rows.append({"id": f"q{index}", "image": f"images/{index}.png", "question": question, "answer": gold,
                     "options": options, "answer_type": "CLOSED", "paraphrase": paraphrase})
        by_question[question] = by_question[f"q{index}"] = {"gold": gold, "letter": LETTERS[options.index(gold)],
                                                            "question": question}
    (root / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return by_question


def _question(prompt: str) -> str:
    return prompt.split("\n", 1)[0]


def _has_image(body: dict) -> bool:
    return "image_url" in json.dumps(body["messages"])


def memorising(truth):
    def rule(prompt: str, body: dict) -> str:
        return truth[_question(prompt)]["letter"]  # the released letter, wherever the options now sit

    return rule


def honest(truth):
    def rule(prompt: str, body: dict) -> str:
        options = option_texts(prompt)
        if not _has_image(body):
            return next(letter for letter, text in options.items() if text == "I don't know")
        return next(letter for letter, text in options.items() if text == truth[_question(prompt)]["gold"])

    return rule


@pytest.fixture()
def local_mc(tmp_path):
    root = tmp_path / "bench"
    truth = _write_bench(root)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def cell(*overrides):
        cfg = compose([f"tracking.uri={uri}", f"paths.cache_dir={tmp_path / 'cache'}", "bench=local",
                       "bench.name=mc_local", f"bench.root={root}", *overrides])
        outcome = run_cell(cfg)
        assert outcome.status == "FINISHED", outcome.error
        return outcome

    cell.truth, cell.uri = truth, uri
    return cell


def _served(server, name):
    return ("model=openai_compatible", f"model.name={name}", f"model.base_url={server.base_url}",
            "model.max_retries=0")


def test_option_order_flags_a_server_that_memorised_the_released_order(local_mc):
    with ChatServer(answer=memorising(local_mc.truth)) as server:
        leaky = local_mc(*_served(server, "memoriser"), "detector=option_order")
    with ChatServer(answer=honest(local_mc.truth)) as server:
        clean = local_mc(*_served(server, "honest"), "detector=option_order")
    # Memoriser: right on every original, wrong on every shuffle (the gold always moves):
    # b = 40, c = 0, exact one-sided McNemar p = 0.5 ** 40.
    assert leaky.metrics["cr"] == 1.0 and leaky.metrics["pcr"] == 0.0 and leaky.metrics["phi"] == 1.0
    assert (leaky.metrics["b"], leaky.metrics["c"]) == (40.0, 0.0)
    assert leaky.metrics["p_value"] == pytest.approx(0.5**40) and leaky.metrics["flag"] == 1.0
    # Honest: right on both arms, no discordant pair: p = 1.
    assert clean.metrics["cr"] == clean.metrics["pcr"] == 1.0
    assert clean.metrics["p_value"] == 1.0 and clean.metrics["flag"] == 0.0
    assert leaky.metrics["n_error_original"] == 0.0 and leaky.metrics["n_no_answer_shuffled"] == 0.0
    run = MlflowClient(local_mc.uri).get_run(leaky.run_id)
    assert run.data.params["detector.answer.temperature"] == "0.0"
    # the tracked run holds the inflation (every pair lost: 1 with no spread) and the MDE at 40 pairs
    logged = run.data.metrics
    assert (logged["inflation"], logged["inflation_ci_low"], logged["inflation_ci_high"]) == (1.0, 1.0, 1.0)
    assert logged["mde"] == pytest.approx(paired_accuracy_mde(40, float(run.data.params["detector.alpha"])))
    artifacts = {item.path for item in MlflowClient(local_mc.uri).list_artifacts(leaky.run_id)}
    assert {"per_example.parquet", "figures"} <= artifacts or any("option_order" in path for path in artifacts)


def test_text_only_flags_answers_without_the_image(local_mc):
    with ChatServer(answer=memorising(local_mc.truth)) as server:
        leaky = local_mc(*_served(server, "memoriser"), "detector=text_only", "detector.chance=uniform")
    with ChatServer(answer=honest(local_mc.truth)) as server:
        clean = local_mc(*_served(server, "honest"), "detector=text_only", "detector.chance=uniform")
    # Memoriser: the released letter is still the gold's letter (the refusal is appended last):
    # 40 of 40 right against chance 1/4: p = 0.25 ** 40.
    assert leaky.metrics["acc_text_only"] == 1.0
    assert leaky.metrics["p_value"] == pytest.approx(0.25**40, rel=1e-6) and leaky.metrics["flag"] == 1.0
    assert clean.metrics["acc_text_only"] == 0.0 and clean.metrics["idk_rate"] == 1.0
    assert clean.metrics["p_value"] == 1.0 and clean.metrics["flag"] == 0.0


def test_imported_responses_give_a_tracked_cell(local_mc, tmp_path):
    # Replies written elsewhere: the released letter for every probe, as a memoriser would.
    responses = tmp_path / "responses.jsonl"
    lines = []
    for index in range(N_EXAMPLES):
        letter = local_mc.truth[f"q{index}"]["letter"]
        for kind in ("original", "option_shuffle::0"):
            lines.append(json.dumps({"probe_id": f"mc_local::test::q{index}::{kind}", "response": f"({letter})"}))
    responses.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cell = local_mc("model=responses", "model.name=elsewhere", f"model.responses_path={responses}",
                    "detector=option_order")
    assert (cell.metrics["b"], cell.metrics["c"]) == (40.0, 0.0) and cell.metrics["flag"] == 1.0
    # An edited responses file is another input: the cell is recomputed, not reused.
    responses.write_text("\n".join(lines[:-2]) + "\n", encoding="utf-8")
    again = local_mc("model=responses", "model.name=elsewhere", f"model.responses_path={responses}",
                     "detector=option_order")
    assert again.run_id != cell.run_id and again.metrics["n_error_shuffled"] == 1.0


def slot_filler(truth):
    """Fills the mask from the released questions it memorised; knows no other wording."""
    released = [entry["question"] for key, entry in truth.items() if key.startswith("q")]

    def rule(prompt: str, body: dict) -> str:
        masked = re.search(r'"(.*)"', prompt).group(1)
        pattern = re.escape(masked).replace(re.escape(DEFAULT_MASK), r"(\w+)")
        for question in released:
            found = re.fullmatch(pattern, question)
            if found:
                return found.group(1)
        return "unknown"

    return rule


def test_slot_guess_flags_a_server_that_fills_only_the_released_wording(local_mc):
    translator = ("translator@detector.translator=demo",)
    with ChatServer(answer=slot_filler(local_mc.truth)) as server:
        leaky = local_mc(*_served(server, "memoriser"), "detector=slot_guess", *translator)
    with ChatServer(answer=lambda prompt, body: "unknown") as server:
        clean = local_mc(*_served(server, "guesser"), "detector=slot_guess", *translator)
    n = leaky.metrics["n_pairs"]
    # the masked word is shared by both wordings, or the example is skipped (and counted)
    assert n >= 30 and n + leaky.metrics["n_skipped"] == N_EXAMPLES
    assert leaky.metrics["em_original"] == 1.0 and leaky.metrics["em_back"] == 0.0
    assert (leaky.metrics["b"], leaky.metrics["c"]) == (n, 0.0)
    assert leaky.metrics["p_value"] == pytest.approx(0.5**n) and leaky.metrics["flag"] == 1.0
    assert clean.metrics["cr"] == clean.metrics["pcr"] == 0.0 and clean.metrics["p_value"] == 1.0
