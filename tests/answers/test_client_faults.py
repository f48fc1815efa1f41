"""The chat client under the faults real servers show, one table row per fault: what each probe's
row becomes (an answer, or an error row with its cause), how many requests were sent, and which
faults end the answering at once (a refused key, an endpoint that is down)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

import pytest

from medexp.answers.openai_client import ChatClient, EndpointUnusable, reply_text
from medexp.config.schemas import AnswerConfig
from medexp.answers.judges.stage import judge_responses
from tests.answers.conftest import choice_probe
from tests.answers.judging import READ
from tests.answers.server import ChatServer, Fault

FAST = {"retry_backoff": 0.01, "retry_backoff_max": 0.02, "request_timeout": 10.0, "max_retries": 2}
KEY = "sk-proj-Zq81bLr0TestKey4455"


def _probes(n: int = 3) -> list:
    return [choice_probe(example_id=f"case{index}", question=f"Case {index}: what does the radiograph show?")
            for index in range(n)]


def _client(server: ChatServer, **settings) -> ChatClient:
    return ChatClient(base_url=server.base_url, model="served-model", **{**FAST, **settings})


def _reply(content: Any = "B", finish: str = "stop", message: Any = ..., **extra) -> dict:
    """A chat-completions body whose choices[0] holds ``message`` (default: a message with ``content``)."""
    message = {"role": "assistant", "content": content, **extra} if message is ... else message
    return {"id": "x", "object": "chat.completion", "model": "served-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


@dataclass(frozen=True)
class Case:
    faults: tuple[Fault, ...]  # queued for Case 1 only; the other probes are answered "B" (right)
    status: str  # Case 1's row status
    cause: Optional[str]  # its error cause
    requests: int  # requests sent for Case 1
    response: str = ""  # the text its row keeps
    timeout: float = 10.0  # the client's request_timeout (short only where a stall must outlast it)


FAULTS = {
    "400 bad request": Case((Fault(400),), "error", "http_4xx", 1),
    "404 unknown route or model": Case((Fault(404),), "error", "http_4xx", 1),
    "429 with Retry-After, then an answer": Case((Fault(429, retry_after="0.05"),), "ok", None, 2, "B"),
    "429 without Retry-After, then an answer": Case((Fault(429),), "ok", None, 2, "B"),
    "429 past the retries": Case((Fault(429),) * 3, "error", "rate_limited", 3),
    "500 then recovery": Case((Fault(500), Fault(502)), "ok", None, 3, "B"),
    "503 past the retries": Case((Fault(503),) * 5, "error", "http_5xx", 3),
    "stall past the timeout, then an answer": Case((Fault(stall=5.0),), "ok", None, 2, "B", timeout=2.0),
    "stall past every timeout": Case((Fault(stall=5.0),) * 3, "error", "timeout", 3, timeout=2.0),
    "body not JSON": Case((Fault(200, body="<html>proxy error</html>"),), "error", "malformed", 1),
    "body a JSON list": Case((Fault(200, payload=[1, 2]),), "error", "malformed", 1),
    "no choices": Case((Fault(200, payload={"choices": []}),), "error", "malformed", 1),
    "null message": Case((Fault(200, payload=_reply(message=None)),), "error", "malformed", 1),
    "string message": Case((Fault(200, payload=_reply(message="B")),), "error", "malformed", 1, "B"),
    "number content": Case((Fault(200, payload=_reply(content=7)),), "error", "malformed", 1),
    "a content part that is not an object": Case((Fault(200, payload=_reply(content=["B"])),), "error", "malformed", 1),
    "null content: an empty reply": Case((Fault(200, payload=_reply(content=None)),), "ok", None, 1),
    "list content with a null text part": Case(
        (Fault(200, payload=_reply(content=[{"type": "text", "text": None}, {"type": "text", "text": "B"}])),),
        "ok", None, 1, "B"),
    "refusal field": Case((Fault(200, payload=_reply(content=None, refusal="I can't help with that.")),),
                          "error", "refused", 1, "I can't help with that."),
    "refusal part": Case((Fault(200, payload=_reply(content=[{"type": "refusal", "refusal": "No."}])),),
                         "error", "refused", 1, "No."),
    "content_filter with text": Case((Fault(200, payload=_reply(content="Possibly B", finish="content_filter")),),
                                     "error", "refused", 1, "Possibly B"),
    "content_filter, null message": Case((Fault(200, payload=_reply(message=None, finish="content_filter")),),
                                         "error", "refused", 1),
    "completions-style text": Case((Fault(200, payload={"choices": [{"index": 0, "text": "B"}]}),), "ok", None, 1,
                                   "B"),
}


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_fault_gives_its_row(name, answer_cfg):
    case = FAULTS[name]
    with ChatServer(answer=lambda prompt, body: "B") as server:
        server.fail("Case 1:", *case.faults)
        table = _client(server, request_timeout=case.timeout).answer_probes(_probes(), answer_cfg, progress=False)
        sent = len(server.requests_for("Case 1:"))
    row = table.iloc[1]
    assert (row["status"], row["error_cause"], sent) == (case.status, case.cause, case.requests)
    assert row["response"] == case.response and row["choice"] is None  # the reply as sent, for the judge
    assert (row["error"] is None) == (case.cause is None)
    # judged: an error is never an answer, right or wrong; a refusal or an empty reply is a no-answer
    verdict = judge_responses(table, _probes(), READ, None).table["verdict"].iloc[1]
    expected = ("correct" if case.response == "B" else "no_answer") if case.status == "ok" else \
        ("no_answer" if case.cause == "refused" else "error")
    assert verdict == expected
    assert list(table["status"].iloc[[0, 2]]) == ["ok", "ok"]


def test_a_down_endpoint_fails_the_pre_flight_and_asks_no_probe(answer_cfg):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = ChatClient(base_url=f"http://127.0.0.1:{port}/v1", model="m", **FAST)
    with pytest.raises(EndpointUnusable, match=r"pre-flight request .* failed \(connection\).*no probe was asked") as error:
        client.answer_probes(_probes(), answer_cfg, progress=False)
    assert error.value.cause.value == "connection"
    # without the pre-flight, each probe is an error row of cause connection (never an answer)
    table = ChatClient(base_url=f"http://127.0.0.1:{port}/v1", model="m", preflight=False, **FAST).answer_probes(
        _probes(), answer_cfg, progress=False)
    assert set(table["error_cause"]) == {"connection"} and set(table["status"]) == {"error"}


def test_a_refused_key_fails_fast_naming_its_variable_never_the_key(monkeypatch, answer_cfg):
    monkeypatch.setenv("MEDEXP_FAULT_KEY", "sk-wrong-key-0000")
    with ChatServer(models=["served-model"], api_key=KEY) as server:
        client = _client(server, api_key_env="MEDEXP_FAULT_KEY")
        with pytest.raises(EndpointUnusable) as error:
            client.answer_probes(_probes(), answer_cfg, progress=False)
        assert server.requests == []  # the pre-flight request found it; no probe went out
    message = str(error.value)
    assert "HTTP 401" in message and "MEDEXP_FAULT_KEY" in message
    assert "sk-wrong-key-0000" not in message and "0000" not in message  # not even the server's masked echo


def test_a_key_revoked_during_the_run_stops_it(monkeypatch, answer_cfg):
    monkeypatch.setenv("MEDEXP_FAULT_KEY", KEY)
    with ChatServer(answer=lambda prompt, body: "B") as server:
        server.fail("Case 1:", Fault(403))
        with pytest.raises(EndpointUnusable, match="HTTP 403 .*MEDEXP_FAULT_KEY"):
            _client(server, api_key_env="MEDEXP_FAULT_KEY", max_concurrency=1).answer_probes(
                _probes(5), answer_cfg, progress=False)
        assert len(server.requests) < 5  # the probes after it were never asked


def test_the_pre_flight_checks_the_model_id(answer_cfg):
    with ChatServer(models=["Qwen/Qwen2.5-VL-7B-Instruct"]) as server:
        with pytest.raises(EndpointUnusable, match=r"does not serve the model 'served-model' \(it serves "
                                                   r"Qwen/Qwen2.5-VL-7B-Instruct\)"):
            _client(server).answer_probes(_probes(), answer_cfg, progress=False)
        assert server.requests == []
        listed = server.model_list_requests
        client = ChatClient(base_url=server.base_url, model="Qwen/Qwen2.5-VL-7B-Instruct", **FAST)
        client.answer_probes(_probes(), answer_cfg, progress=False)
        client.answer_probes(_probes(), answer_cfg, progress=False)
        assert server.model_list_requests - listed == 1 and len(server.requests) == 6  # one pre-flight per client


def test_a_header_echoing_server_never_gets_the_key_stored(monkeypatch, answer_cfg):
    monkeypatch.setenv("MEDEXP_FAULT_KEY", KEY)
    with ChatServer(api_key=KEY, echo_headers=True) as server:
        server.fail("Case 2:", Fault(500, payload={"error": {"message": f"upstream saw Bearer {KEY}"}}),
                    Fault(500, payload={"error": {"message": f"upstream saw Bearer {KEY}"}}),
                    Fault(500, payload={"error": {"message": f"upstream saw Bearer {KEY}"}}))
        table = _client(server, api_key_env="MEDEXP_FAULT_KEY").answer_probes(_probes(), answer_cfg, progress=False)
    assert "Bearer ***" in table.iloc[0]["response"]  # the echo came back, redacted
    assert table.iloc[2]["error_cause"] == "http_5xx" and "upstream saw Bearer ***" in table.iloc[2]["error"]
    assert KEY not in table.to_json()


@pytest.mark.parametrize("header", ["inf", "1e10", "86400", "nan", "-5", "Wed, 21 Oct 2999 07:28:00 GMT"])
def test_a_huge_or_odd_retry_after_waits_at_most_the_cap(header, answer_cfg):
    from medexp.answers.openai_client import _retry_after

    with ChatServer(answer=lambda prompt, body: "B") as server:
        server.fail("Case 0:", Fault(429, retry_after=header))
        client = _client(server, retry_after_max=0.2, max_retries=1)
        table = client.answer_probes(_probes(1), answer_cfg, progress=False)  # a day's wait would hang here
        assert len(server.requests) == 2
    assert table.iloc[0]["status"] == "ok"
    assert 0.0 <= client._delay(0, _retry_after(header)) <= 0.2  # no OverflowError, never beyond the cap


def test_stopping_leaves_a_long_back_off_at_once(answer_cfg):
    """A Retry-After of a day, honoured in full: the caller's stop (what a signal triggers in the
    main thread) ends the answering within moments, and no request follows it."""
    from medexp.answers.openai_client import _Stopped

    with ChatServer(fault_rule=lambda prompt, body: Fault(503, retry_after="86400")) as server:
        client = _client(server, retry_after_max=86400.0, max_retries=3)
        stop = threading.Event()
        outcome: dict[str, Any] = {}

        def ask() -> None:
            try:
                client.complete(client.request_body(_probes(1)[0], AnswerConfig()), stop)
            except _Stopped:
                outcome["stopped"] = time.monotonic()

        worker = threading.Thread(target=ask)
        worker.start()
        while not server.requests:
            time.sleep(0.01)
        stop.set()
        signalled = time.monotonic()
        worker.join(timeout=5)
        assert not worker.is_alive() and outcome["stopped"] - signalled < 1.0
        assert len(server.requests) == 1


def test_reply_shapes_are_read_or_named():
    assert reply_text(_reply(content=[{"type": "text", "text": "A"}, {"type": "image_url"}, {"text": "B"}])) == "AB"
    assert reply_text(_reply(content="", refusal=None)) == ""
    assert reply_text(_reply(content="C", refusal="   ")) == "C"  # a blank refusal field is no refusal
    with pytest.raises(Exception, match="choices"):
        reply_text({"choices": "B"})
