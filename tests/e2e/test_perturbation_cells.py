"""perturbation_gap end to end: a VLMEvalKit TSV benchmark and its perturbed twin (another TSV,
paired by index), answered by scripted OpenAI-compatible servers through ``run_cell`` exactly as
``python -m medexp`` runs it.

Every image is one flat colour whose red level encodes the gold option: an original and its twin
ask the same question over different images, and the twin's colour names another option. A
*memorising* server answers each question with the letter it memorised from the originals; a
*reading* server decodes the image it is sent and answers what the colour says.
"""

from __future__ import annotations

import base64
import io
import json
import re

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from PIL import Image

from medexp.benchmarks.options import LETTERS
from medexp.stats.sample_size import paired_accuracy_mde
from medexp.config import compose
from medexp.runner.cell_run import run_cell
from tests.answers.server import ChatServer, prompt_text
from tests.benchmarks.upstream import write_vlmevalkit_tsv

N_ITEMS = 30
N_TWINS = 26  # the last originals have no twin, as after the authors' manual check
FINDINGS = ["nodule", "effusion", "cardiomegaly", "normal"]
_RED = 40  # the red level of option i is _RED * (i + 1)


def _colour_image(gold: int) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (_RED * (gold + 1), 90, 90)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _row(index: int, gold: int) -> dict:
    return {"index": index, "question": f"Case {index}: what does the image show?", "hint": "", **dict(zip("ABCD", FINDINGS)),
            "answer": LETTERS[gold], "category": "finding" if index % 3 else "normal_check", "image": _colour_image(gold)}


@pytest.fixture()
def paired_tsv(tmp_path):
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 4, N_ITEMS)
    shift = rng.integers(1, 4, N_ITEMS)  # the twin's answer is always another option
    root = tmp_path / "LMUData"
    write_vlmevalkit_tsv(root / "MMStar.tsv", [_row(i, int(gold[i])) for i in range(N_ITEMS)])
    write_vlmevalkit_tsv(root / "MMStar_pert_local.tsv", [_row(i, int((gold[i] + shift[i]) % 4)) for i in range(N_TWINS)])
    memorised = {f"Case {i}:": LETTERS[int(gold[i])] for i in range(N_ITEMS)}
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def cell(server, name, *overrides):
        cfg = compose([f"tracking.uri={uri}", f"paths.cache_dir={tmp_path / 'cache'}", "bench=mmstar_tsv",
                       f"bench.root={root}", "detector=perturbation_gap", "detector.n_resamples=500",
                       "model=openai_compatible", f"model.name={name}", f"model.base_url={server.base_url}",
                       "model.max_retries=0", *overrides])
        outcome = run_cell(cfg)
        assert outcome.status == "FINISHED", outcome.error
        return outcome

    cell.memorised, cell.uri = memorised, uri
    return cell


def memorising(memorised):
    def rule(prompt: str, body: dict) -> str:
        return memorised[re.match(r"Case \d+:", prompt).group(0)]

    return rule


def reading(prompt: str, body: dict) -> str:
    url = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", json.dumps(body["messages"])).group(1)
    with Image.open(io.BytesIO(base64.b64decode(url))) as image:
        red = image.convert("RGB").getpixel((0, 0))[0]
    return LETTERS[round(red / _RED) - 1]


def test_a_server_that_memorised_the_originals_is_flagged_and_one_that_reads_the_image_is_not(paired_tsv):
    with ChatServer(answer=memorising(paired_tsv.memorised)) as server:
        leaky = paired_tsv(server, "memoriser")
        asked = [prompt_text(body) for body in server.requests]
    with ChatServer(answer=reading) as server:
        clean = paired_tsv(server, "reader")
    # the memoriser: right on all 26 originals, wrong on all 26 twins: b = 26, c = 0, p = 0.5 ** 26
    m = leaky.metrics
    assert (m["acc_original"], m["acc_twin"], m["gap"]) == (1.0, 0.0, 1.0)
    assert (m["b"], m["c"], m["n_pairs"]) == (26.0, 0.0, 26.0)
    assert m["p_value"] == pytest.approx(0.5**26) and m["flag"] == 1.0
    assert m["n_unpaired"] == 4.0 and m["n_unpaired.no_twin"] == 4.0
    assert m["n_error_original"] == m["n_error_twin"] == 0.0
    # both arms put the same question; only the image differs
    assert len(asked) == 52 and len(set(asked)) == 26
    # the reader: right on both arms, no discordant pair
    c = clean.metrics
    assert (c["acc_original"], c["acc_twin"], c["gap"]) == (1.0, 1.0, 0.0)
    assert c["p_value"] == 1.0 and c["flag"] == 0.0
    run = MlflowClient(paired_tsv.uri).get_run(leaky.run_id)
    assert run.data.tags["medexp.family"] == "perturbation_gap/none"  # the family, per control
    # the tracked run holds the inflation (the gap, every pair lost) and the McNemar MDE at 26 pairs
    logged = run.data.metrics
    assert (logged["inflation"], logged["inflation_ci_low"], logged["inflation_ci_high"]) == (1.0, 1.0, 1.0)
    assert logged["mde"] == pytest.approx(paired_accuracy_mde(26, float(run.data.params["detector.alpha"])))
    assert (c["inflation"], c["inflation_ci_low"], c["inflation_ci_high"]) == (0.0, 0.0, 0.0)
    artifacts = [item.path for item in MlflowClient(paired_tsv.uri).list_artifacts(leaky.run_id)]
    assert any("per_pair" in path for path in artifacts), artifacts


def test_constat_against_five_reference_servers_named_with_overrides(paired_tsv):
    """Five clean reference servers, listed as ``openai_compatible name=... base_url=...`` entries,
    read every image but answer the first k cases wrong on both arms (k = 0, 4, 8, 12, 16): their
    twin and original accuracies are equal, the line original = twin. The cell's model answers
    every original from memory and reads the twins, wrong on the first 10: twin accuracy 16/26,
    where the line expects 16/26 on the originals, against its 26/26 (inflation 10/26)."""
    misses = {f"ref_{k}": k for k in (0, 4, 8, 12, 16)}

    def answer(prompt: str, body: dict) -> str:
        case = re.match(r"Case (\d+):", prompt)
        read = reading(prompt, body)
        wrong = LETTERS[(LETTERS.index(read) + 1) % 4]
        if body["model"] in misses:
            return wrong if int(case.group(1)) < misses[body["model"]] else read
        if read == paired_tsv.memorised[case.group(0)]:
            return read  # the original, answered from memory
        return wrong if int(case.group(1)) < 10 else read

    with ChatServer(answer=answer) as server:
        entries = ",".join(f"'openai_compatible name={name} base_url={server.base_url} max_retries=0'"
                           for name in misses)
        outcome = paired_tsv(server, "candidate", f"detector.reference_models=[{entries}]")
    m = outcome.metrics
    assert (m["acc_original"], m["acc_twin"], m["n_references"]) == (1.0, pytest.approx(16 / 26), 5.0)
    assert [m[f"reference_gap.{name}"] for name in misses] == [0.0] * 5
    assert m["constat_n_references"] == 5.0 and m["constat_expected"] == pytest.approx(16 / 26)
    assert m["constat_inflation"] == pytest.approx(10 / 26)
    assert m["constat_ci_low"] <= 10 / 26 <= m["constat_ci_high"] and m["constat_p_value"] < 0.01
    assert m["p_value"] == m["p_reference"]  # ConStat is descriptive: the cell's test is unchanged
    logged = MlflowClient(paired_tsv.uri).get_run(outcome.run_id).data.metrics
    assert logged["constat_inflation"] == pytest.approx(10 / 26)
    artifacts = [item.path for item in MlflowClient(paired_tsv.uri).list_artifacts(outcome.run_id)]
    assert any("constat" in path for path in artifacts), artifacts
