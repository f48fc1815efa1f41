"""Answering cells end to end under server faults, through ``run_cell`` exactly as ``python -m
medexp`` runs it: a fault never becomes evidence. A dead endpoint or a refused key ends every
answering detector FAILED naming the cause, with no finished p-value; errors on one arm never flag
an honest model; a cell with too few answers fails with its counts, and the same command after
the server recovers asks only the probes that had failed and gives the p-value of a clean run;
a finished cell that left probes unanswered is never reused.

The benchmark and the scripted servers are those of ``test_mmdetect_cells``: a *memorising*
server answers the released letter, an *honest* one the gold's letter wherever it sits.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from medexp.config import compose
from medexp.runner.cell_run import run_cell
from tests.answers.server import ChatServer, Fault, option_texts
from tests.e2e.test_mmdetect_cells import N_EXAMPLES, _question, _write_bench, honest, memorising

REPO = Path(__file__).resolve().parents[2]
TRANSLATOR = "translator@detector.translator=demo"
DETECTORS = {"option_order": (), "text_only": ("detector.chance=uniform",), "slot_guess": (TRANSLATOR,)}
KEY = "sk-proj-e2eKey0123456789abcdef"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One tracking store for the module (creating one costs seconds); every test's cells differ by
    their benchmark root (part of the cell's settings) and by model name."""
    return f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"


@pytest.fixture()
def mc(tmp_path, store):
    root = tmp_path / "bench"
    truth = _write_bench(root)
    uri = store

    def overrides(*more, cache: str = "cache"):
        return [f"tracking.uri={uri}", f"paths.cache_dir={tmp_path / cache}", "bench=local", "bench.name=mc_local",
                f"bench.root={root}", *more]

    def cell(*more, cache: str = "cache"):
        return run_cell(compose(overrides(*more, cache=cache)))

    cell.truth, cell.uri, cell.root, cell.overrides = truth, uri, root, overrides
    return cell


def served(server_or_url, name: str = "served", *more) -> tuple[str, ...]:
    url = server_or_url if isinstance(server_or_url, str) else server_or_url.base_url
    return ("model=openai_compatible", f"model.name={name}", f"model.base_url={url}", "model.max_retries=1",
            "model.retry_backoff=0.01", "model.retry_backoff_max=0.02", "model.request_timeout=5", *more)


def _free_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def _runs(uri: str, cell_key: str) -> list:
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("medexp")
    return client.search_runs([experiment.experiment_id], f"tags.`medexp.cell_key` = '{cell_key}'")


def _no_evidence_naming(uri: str, model: str, cause: str) -> None:
    """The report resolves a claim on the cell as "no evidence", citing the failed run's causes."""
    from medexp.report.cells import CellIndex
    from medexp.report.claims import Claim, Evidence, Selection
    from medexp.report.conditions import Condition
    from medexp.report.evaluate import evaluate_claim
    from medexp.report.quantifiers import Quantifier
    from medexp.tracking import Tracker

    tracker = Tracker(compose([f"tracking.uri={uri}"]).tracking, REPO)
    selection = Selection(model=(model,), bench=("mc_local",), detector=None, control=None)
    item = Evidence("clean", selection, Condition.parse("p_value > 0.05"), Quantifier.parse("all"), None)
    result = evaluate_claim(Claim("c", "The model is clean.", "§0", (item,), "clean", "leaky"),
                            CellIndex.from_runs(tracker.search_cells()))
    assert result.status == "no evidence"
    (missing,) = result.items[0].missing
    assert missing.reason == "no FINISHED run (latest: FAILED)" and cause in missing.attempts[0].error


def _case(prompt: str) -> int:
    """The example number of a probe's prompt ("Case 12: which finding ...")."""
    return int(prompt.split(" ", 2)[1].rstrip(":"))


def _is_shuffled(truth):
    """Whether a request is an option_shuffle probe: its gold no longer sits at the released letter."""
    def shuffled(prompt: str, body: dict) -> bool:
        entry = truth[_question(prompt)]
        return option_texts(prompt).get(entry["letter"]) != entry["gold"]

    return shuffled


@pytest.mark.parametrize("detector", list(DETECTORS))
@pytest.mark.parametrize("fault", ["down", "key refused"])
def test_a_dead_endpoint_or_a_refused_key_leaves_no_verdict(mc, monkeypatch, detector, fault):
    monkeypatch.setenv("MEDEXP_E2E_KEY", KEY)
    with ChatServer(answer=honest(mc.truth), api_key="another-key") as server:
        url = _free_port_url() if fault == "down" else server.base_url
        name = f"{detector}_{fault.replace(' ', '_')}"
        outcome = mc(*served(url, name, "model.api_key_env=MEDEXP_E2E_KEY"), f"detector={detector}",
                     *DETECTORS[detector])
        assert server.requests == [] or fault == "key refused"
    assert outcome.status == "FAILED" and "p_value" not in outcome.metrics
    expected = "(connection)" if fault == "down" else "HTTP 401 .*MEDEXP_E2E_KEY"
    assert __import__("re").search(expected, outcome.error), outcome.error
    assert KEY not in outcome.error
    runs = _runs(mc.uri, outcome.cell_key)
    assert [run.info.status for run in runs] == ["FAILED"]
    assert "p_value" not in runs[0].data.metrics and KEY not in json.dumps(runs[0].data.tags)
    _no_evidence_naming(mc.uri, name, "connection" if fault == "down" else "HTTP 401")


def test_503s_on_one_arm_never_flag_an_honest_model(mc):
    shuffled = _is_shuffled(mc.truth)

    def rule(prompt, body):  # 2 of 80 probes fail: above answer.min_answered
        return Fault(503) if shuffled(prompt, body) and _case(prompt) in (3, 17) else None

    with ChatServer(answer=honest(mc.truth), fault_rule=rule) as server:
        outcome = mc(*served(server, "honest_503"), "detector=option_order")
    assert outcome.status == "FINISHED", outcome.error
    m = outcome.metrics
    # errors are no answers: the two pairs leave, the other 38 are right on both arms
    assert (m["n_pairs"], m["n_excluded_pairs"], m["b"], m["c"]) == (38.0, 2.0, 0.0, 0.0)
    assert m["p_value"] == 1.0 and m["flag"] == 0.0
    assert (m["n_probes"], m["n_answered"], m["n_errors"], m["n_errors.http_5xx"]) == (80.0, 78.0, 2.0, 2.0)
    assert m["n_errors.connection"] == 0.0
    assert any("2 of 80 probes got no answer (http_5xx 2" in warning for warning in outcome.warnings)
    tags = MlflowClient(mc.uri).get_run(outcome.run_id).data.tags
    assert "http_5xx 2" in tags["medexp.warnings"]


def test_too_few_answers_fail_the_cell_and_the_rerun_asks_only_the_failed_probes(mc, tmp_path):
    shuffled = _is_shuffled(mc.truth)
    broken = {"on": True}

    def rule(prompt, body):
        return Fault(503) if broken["on"] and shuffled(prompt, body) and _case(prompt) < 10 else None

    with ChatServer(answer=memorising(mc.truth), fault_rule=rule) as server:
        failed = mc(*served(server, "memoriser"), "detector=option_order")
        assert failed.status == "FAILED" and "p_value" not in failed.metrics
        assert "70 of 80 probes answered (87.5%), below answer.min_answered=0.95" in failed.error
        assert "http_5xx 10" in failed.error
        run = MlflowClient(mc.uri).get_run(failed.run_id)
        assert run.data.metrics["n_errors.http_5xx"] == 10.0 and run.data.metrics["n_answered"] == 70.0
        assert "p_value" not in run.data.metrics and "http_5xx 10" in run.data.tags["medexp.warnings"]
        _no_evidence_naming(mc.uri, "memoriser", "http_5xx 10")
        asked_before = len(server.requests)
        broken["on"] = False  # the server recovers; the same command, no force
        recovered = mc(*served(server, "memoriser"), "detector=option_order")
        asked = server.requests[asked_before:]
    assert recovered.status == "FINISHED" and len(asked) == 10  # exactly the probes without an answer
    with ChatServer(answer=memorising(mc.truth)) as server:  # a clean run from scratch (force: not the tracked one)
        clean = mc(*served(server, "memoriser"), "detector=option_order", "force=true", cache="clean-cache")
    assert recovered.metrics["p_value"] == clean.metrics["p_value"] == pytest.approx(0.5**40)
    assert recovered.metrics["n_errors"] == 0.0 and recovered.metrics["flag"] == 1.0


def test_a_finished_cell_with_unanswered_probes_is_not_reused(mc):
    shuffled = _is_shuffled(mc.truth)
    broken = {"on": True}

    def rule(prompt, body):  # 2 of 80 probes fail: the cell finishes, with its errors counted
        return Fault(500) if broken["on"] and shuffled(prompt, body) and _case(prompt) in (5, 6) else None

    with ChatServer(answer=honest(mc.truth), fault_rule=rule) as server:
        first = mc(*served(server, "honest_reuse"), "detector=option_order")
        assert first.status == "FINISHED" and first.metrics["n_errors"] == 2.0
        broken["on"] = False
        before = len(server.requests)
        second = mc(*served(server, "honest_reuse"), "detector=option_order")
        assert second.status == "FINISHED" and second.run_id != first.run_id
        assert len(server.requests) - before == 2 and second.metrics["n_errors"] == 0.0
        third = mc(*served(server, "honest_reuse"), "detector=option_order")
    assert third.status == "CACHED" and third.run_id == second.run_id


def test_transient_faults_and_malformed_replies_are_retried_or_counted(mc):
    with ChatServer(answer=honest(mc.truth)) as server:
        server.fail("Case 1:", Fault(429, retry_after="0.05"))
        server.fail("Case 2:", Fault(500))
        server.fail("Case 3:", Fault(200, payload={"choices": [{"message": None, "finish_reason": "stop"}]}))
        server.fail("Case 4:", Fault(200, payload={"choices": [{"message": {"content": "A", "refusal": None},
                                                                            "finish_reason": "content_filter"}]}))
        outcome = mc(*served(server, "honest_transient"), "detector=option_order")
    assert outcome.status == "FINISHED", outcome.error
    m = outcome.metrics
    assert (m["n_errors"], m["n_errors.malformed"], m["n_refused"], m["n_errors.rate_limited"]) == (1, 1, 1, 0)
    # the malformed reply's pair leaves; the content filter's refusal stays in, as a no-answer
    assert m["flag"] == 0.0 and m["n_excluded_pairs"] == 1.0 and m["n_verdict.no_answer"] == 1.0


# ------------------------------------------------------------------------------ imported files

def _lines(truth, reply_field: str = "response", **extra) -> list[dict]:
    """A memoriser's replies to every probe, under ``reply_field``."""
    return [{"probe_id": f"mc_local::test::q{index}::{kind}", reply_field: f"({truth[f'q{index}']['letter']})", **extra}
            for index in range(N_EXAMPLES) for kind in ("original", "option_shuffle::0")]


def _write(path: Path, lines: list[dict], bom: bool = False, raw: bytes = b"") -> Path:
    text = "".join(json.dumps(line) + "\n" for line in lines)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8") + raw)
    return path


@pytest.mark.parametrize("harness", ["medexp", "medvigil", "vlmevalkit", "bom"])
def test_imported_files_in_each_harness_naming_give_the_same_cell(mc, tmp_path, harness):
    lines = {
        "medexp": _lines(mc.truth),
        "medvigil": _lines(mc.truth, "model_answer", model_letter="Z"),
        # VLMEvalKit keeps the gold under `answer`: the reply is `prediction`, never the gold
        "vlmevalkit": [{**line, "answer": "A"} for line in _lines(mc.truth, "prediction")],
        "bom": _lines(mc.truth),
    }[harness]
    path = _write(tmp_path / f"{harness}.jsonl", lines, bom=harness == "bom")
    outcome = mc("model=responses", f"model.name={harness}", f"model.responses_path={path}", "detector=option_order")
    assert outcome.status == "FINISHED", outcome.error
    assert (outcome.metrics["b"], outcome.metrics["c"], outcome.metrics["n_errors"]) == (40.0, 0.0, 0.0)
    assert outcome.metrics["p_value"] == pytest.approx(0.5**40)


def test_an_imported_file_without_a_known_reply_field_is_refused_until_named(mc, tmp_path):
    path = _write(tmp_path / "output.jsonl", _lines(mc.truth, "output"))
    refused = mc("model=responses", "model.name=other", f"model.responses_path={path}", "detector=option_order")
    assert refused.status == "FAILED"
    assert "no reply field" in refused.error and "'output'" in refused.error and "model.reply_fields" in refused.error
    named = mc("model=responses", "model.name=other", f"model.responses_path={path}", "detector=option_order",
               "model.reply_fields=[output]")
    assert named.status == "FINISHED" and named.metrics["b"] == 40.0


def test_imported_statuses_and_bad_lines_are_no_answers(mc, tmp_path, caplog):
    lines = _lines(mc.truth)
    lines[0]["status"] = "failed"  # a reply with a failure status is no answer
    lines[2]["status"] = "error: HTTP 503 Service Unavailable"
    lines[4]["status"] = "done"  # an answer, in another harness's words
    lines[6]["status"] = "bogus"  # unknown: a bad line
    path = _write(tmp_path / "mixed.jsonl", lines[:-1], raw=b'{"probe_id": "mc_local::test::q39::option_shuffle::0", '
                                                                 b'"response": "\xff(A)"}\n')
    outcome = mc("model=responses", "model.name=mixed", f"model.responses_path={path}", "detector=option_order",
                 "detector.answer.min_answered=0.9")
    assert outcome.status == "FINISHED", outcome.error
    m = outcome.metrics
    assert (m["n_errors.other"], m["n_errors.http_5xx"], m["n_errors.malformed"], m["n_errors.not_imported"]) \
        == (1, 1, 1, 1)
    assert m["n_answered"] == 76.0 and m["n_pairs"] == 36.0
    # counted in file order: the unknown status on line 7, the bytes that are no UTF-8 on line 80
    assert f"2 bad line(s) skipped (unknown status 1, not UTF-8 1); first: {path}:7: unknown status" in caplog.text
    warnings = MlflowClient(mc.uri).get_run(outcome.run_id).data.tags["medexp.warnings"]
    assert "4 of 80 probes got no answer" in warnings and "not_imported 1" in warnings


# ------------------------------------------------------------------------------ processes

def _medexp(*args, timeout: float = 120):
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return subprocess.Popen([sys.executable, "-m", "medexp", *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.extended
def test_sigterm_ends_a_cell_waiting_on_a_long_retry_after_within_seconds(mc, tmp_path):
    with ChatServer(fault_rule=lambda prompt, body: Fault(503, retry_after="86400")) as server:
        args = [*mc.overrides(*served(server, "stuck", "model.retry_after_max=86400", "model.max_retries=5")),
                "detector=option_order", f"hydra.run.dir={tmp_path / 'hydra'}"]
        proc = _medexp(*args)
        deadline = time.time() + 120
        while not server.requests and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert server.requests, proc.communicate()[1][-3000:]
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        signalled, asked = time.monotonic(), len(server.requests)
        _, stderr = proc.communicate(timeout=30)
        elapsed = time.monotonic() - signalled
        assert len(server.requests) == asked  # no request after the signal
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert elapsed < 10, elapsed
    (run,) = _runs(mc.uri, "model=stuck,bench=mc_local,detector=option_order,control=none")
    assert run.info.status == "KILLED" and run.data.tags["medexp.signal"] == "SIGTERM"


@pytest.mark.parametrize("sweep", [False, True])
def test_a_key_where_a_variable_name_belongs_stops_before_anything_is_written(mc, tmp_path, sweep):
    secret = "sk-live-51HxYzSecretValue0123456789"
    value = f"OPENAI_API_KEY,{secret}" if sweep else secret
    output = tmp_path / "hydra"
    uri = f"sqlite:///{tmp_path / 'never.db'}"
    args = [*(["-m"] if sweep else []), *mc.overrides(*served("http://127.0.0.1:9/v1", "hosted")), f"tracking.uri={uri}",
            f"model.api_key_env={value}", "detector=option_order", f"hydra.run.dir={output}",
            f"hydra.sweep.dir={output}"]
    proc = _medexp(*args)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, stderr[-3000:]
    assert "api_key_env must name the environment variable" in stderr
    assert secret not in stdout + stderr
    assert not output.exists()  # no .hydra/config.yaml, overrides.yaml, multirun.yaml
    assert not (tmp_path / "never.db").exists()  # no run, no params
