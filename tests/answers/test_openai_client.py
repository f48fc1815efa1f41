"""The OpenAI-compatible client against a scripted local server: requests as configured, retries,
errors as rows, bounded concurrency, results independent of completion order."""

from __future__ import annotations

import base64
import dataclasses
import random
import socket
import time

import pandas as pd
import pytest

from medexp.answers import ChatClient, check_response_table
from medexp.answers.judges.stage import judge_responses
from medexp.answers.openai_client import answer_probes
from medexp.config import compose
from medexp.config.schemas import AnswerConfig, AnswerMode
from tests.answers.conftest import OPTIONS, choice_probe, text_probe, write_png
from tests.answers.judging import READ
from tests.answers.server import ChatServer, Fault, letter_of_option

FAST = {"retry_backoff": 0.01, "retry_backoff_max": 0.05, "request_timeout": 5.0}


def client_for(server: ChatServer, **settings) -> ChatClient:
    return ChatClient(base_url=server.base_url, model="served-model", **{**FAST, **settings})


def probe_set(n: int = 12, tmp_path=None) -> list:
    """Probes whose option order rotates; every third has no effusion option (the rule then
    replies something unparseable)."""
    probes = []
    for index in range(n):
        options = list(OPTIONS)
        if index % 3 == 2:
            options[1] = "Pneumothorax"
        rotated = tuple(options[index % 4:] + options[:index % 4])
        gold = "ABCD"[rotated.index(options[(index // 2) % 4])]
        image = write_png(tmp_path / f"scan{index}.png", seed=index) if tmp_path is not None and index % 2 else None
        probes.append(choice_probe(example_id=f"case{index:02d}", options=rotated, gold=gold, image=image,
                                   question=f"Case {index:02d}: what does the radiograph show?"))
    return probes


def expected_choice(probe):
    matches = [letter for letter, text in zip("ABCD", probe.options) if "effusion" in text]
    return matches[0] if matches else None


def effusion_rule():
    return letter_of_option(lambda text: "effusion" in text)


def test_rows_follow_the_rule_and_the_gold(chat_server, tmp_path, answer_cfg):
    chat_server.answer = effusion_rule()
    probes = probe_set(12, tmp_path)
    table = client_for(chat_server).answer_probes(probes, answer_cfg, progress=False)
    check_response_table(table, [probe.probe_id for probe in probes])
    judged = judge_responses(table, probes, READ, None).table
    for probe, row, meant in zip(probes, table.itertuples(), judged.itertuples()):
        choice = expected_choice(probe)
        assert row.status == "ok" and row.choice is None and row.error is None  # a reply, for the judge to read
        assert row.response == (choice or "I cannot tell from this image.")
        assert meant.status == ("ok" if choice else "no_answer")
        assert meant.choice == choice and meant.correct == (choice == probe.gold)
    assert 0 < judged["correct"].sum() < len(table)  # the rule is right on some probes only
    assert len(chat_server.requests) == len(probes)


def test_every_request_carries_the_configured_decoding(chat_server, tmp_path):
    probes = probe_set(6, tmp_path) + [text_probe()]
    cfg = AnswerConfig(system_prompt="You are a radiologist.")
    client_for(chat_server).answer_probes(probes, cfg, progress=False)
    assert len(chat_server.requests) == len(probes)
    for body in chat_server.requests:
        assert body["temperature"] == 0.0 and body["max_tokens"] == 8
        assert body["model"] == "served-model" and body["n"] == 1 and body["stream"] is False
        assert "seed" not in body
        assert body["messages"][0] == {"role": "system", "content": "You are a radiologist."}
    client_for(chat_server).answer_probes(probes[:2], AnswerConfig(seed=7, max_new_tokens=3), progress=False)
    assert [(body["seed"], body["max_tokens"], body["messages"][0]["role"]) for body in chat_server.requests[-2:]] \
        == [(7, 3, "user")] * 2


def test_image_goes_as_a_data_url_of_the_probe_image_and_text_only_has_no_image_part(chat_server, tmp_path, answer_cfg):
    probes = probe_set(4, tmp_path)
    client_for(chat_server).answer_probes(probes, answer_cfg, progress=False)
    for probe in probes:
        (body,) = chat_server.requests_for(probe.question)
        content = body["messages"][-1]["content"]
        if probe.image is None:
            assert isinstance(content, str) and "image" not in str(body)
        else:
            image_part = content[0]
            assert image_part["type"] == "image_url"
            header, data = image_part["image_url"]["url"].split(",", 1)
            assert header == "data:image/png;base64" and base64.b64decode(data) == probe.image.read_bytes()


def test_sampling_only_when_allowed_and_then_sent_as_given(chat_server, answer_cfg):
    probes = probe_set(3)
    with pytest.raises(ValueError, match="allow_sampling"):
        client_for(chat_server).answer_probes(probes, dataclasses.replace(answer_cfg, temperature=0.7), progress=False)
    assert chat_server.requests == []  # refused before any request
    sampled = dataclasses.replace(answer_cfg, temperature=0.7, allow_sampling=True)
    client_for(chat_server).answer_probes(probes, sampled, progress=False)
    assert [body["temperature"] for body in chat_server.requests] == [0.7] * 3


def test_an_echoed_temperature_is_checked(answer_cfg):
    probes = probe_set(3)
    with ChatServer(echo_temperature=True) as honest:
        assert (client_for(honest).answer_probes(probes, answer_cfg, progress=False)["status"] == "ok").all()
    with ChatServer(echo_temperature=0.7) as overriding:
        table = client_for(overriding).answer_probes(probes, answer_cfg, progress=False)
    assert (table["status"] == "error").all()
    assert table["error"].str.contains("server reports temperature 0.7 for a request sent with temperature 0.0").all()


def test_500_then_success_and_429_with_retry_after_are_retried(chat_server, answer_cfg):
    chat_server.answer = effusion_rule()
    probes = probe_set(4)
    chat_server.fail("Case 00", Fault(500), Fault(503))
    chat_server.fail("Case 01", Fault(429, retry_after="0.3"))
    table = client_for(chat_server, retry_backoff=0.0).answer_probes(probes, answer_cfg, progress=False)
    assert list(table["status"]) == ["ok", "ok", "ok", "ok"]
    assert table["response"].iloc[2] == "I cannot tell from this image."  # case 02 offers no effusion
    assert len(chat_server.requests_for("Case 00")) == 3 and len(chat_server.requests_for("Case 01")) == 2
    first, second = chat_server.times_for("Case 01")
    assert second - first >= 0.3  # the server's Retry-After, though the client's own backoff is 0


def test_a_retry_after_http_date_is_honoured():
    from email.utils import formatdate

    from medexp.answers.openai_client import _retry_after

    assert _retry_after("2") == 2.0 and _retry_after(None) is None and _retry_after("soon") is None
    assert 8 < _retry_after(formatdate(time.time() + 10, usegmt=True)) <= 10
    assert _retry_after(formatdate(time.time() - 10, usegmt=True)) == 0.0
    assert _retry_after("inf") == float("inf") and _retry_after("1e10") == 1e10  # capped by the caller
    assert _retry_after("nan") is None and _retry_after("-3") == 0.0


def test_other_4xx_fail_at_once_and_stay_rows(chat_server, answer_cfg):
    chat_server.answer = effusion_rule()
    probes = probe_set(3)
    chat_server.fail("Case 01", Fault(400), Fault(400))
    table = client_for(chat_server).answer_probes(probes, answer_cfg, progress=False)
    assert list(table["status"]) == ["ok", "error", "ok"]
    row = table.iloc[1]
    assert len(chat_server.requests_for("Case 01")) == 1  # no retry
    assert "HTTP 400" in row["error"] and "scripted failure 400" in row["error"]
    assert row["response"] == "" and row["choice"] is None


def test_persistent_5xx_gives_up_after_max_retries_as_an_error_row(chat_server, answer_cfg):
    probes = probe_set(3)
    chat_server.fail("Case 02", *[Fault(502)] * 10)
    table = client_for(chat_server, max_retries=2).answer_probes(probes, answer_cfg, progress=False)
    assert list(table["status"]) == ["ok", "ok", "error"]
    assert len(chat_server.requests_for("Case 02")) == 3
    assert "HTTP 502" in table.iloc[2]["error"] and "gave up after 3 attempts" in table.iloc[2]["error"]


def test_a_timeout_is_retried_and_without_retries_is_an_error_row(chat_server, answer_cfg):
    probes = probe_set(2)
    # a stall far longer than the timeout, and a timeout far longer than an answer on a loaded machine
    chat_server.fail("Case 00", Fault(stall=6.0))
    table = client_for(chat_server, request_timeout=1.5).answer_probes(probes, answer_cfg, progress=False)
    assert (table["status"] == "ok").all() and len(chat_server.requests_for("Case 00")) == 2
    chat_server.fail("Case 01", Fault(stall=6.0))
    table = client_for(chat_server, request_timeout=1.5, max_retries=0).answer_probes(probes, answer_cfg,
                                                                                        progress=False)
    assert list(table["status"]) == ["ok", "error"] and "Timeout" in table.iloc[1]["error"]


def test_a_malformed_reply_is_an_error_row(chat_server, answer_cfg):
    chat_server.fail("Case 00", Fault(200, body="<html>proxy page</html>"), Fault(200, body='{"choices": []}'))
    client = client_for(chat_server)
    probes = probe_set(1)
    for _ in range(2):
        row = client.answer_probes(probes, answer_cfg, progress=False).iloc[0]
        assert row["status"] == "error" and "malformed reply" in row["error"] and row["error_cause"] == "malformed"


def test_an_unreachable_server_gives_connection_error_rows_without_the_pre_flight(answer_cfg):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = ChatClient(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=1, preflight=False, **FAST)
    table = client.answer_probes(probe_set(2), answer_cfg, progress=False)
    assert (table["status"] == "error").all() and table["error"].str.contains("ConnectionError").all()
    assert set(table["error_cause"]) == {"connection"}


def test_a_missing_image_is_an_error_row(chat_server, answer_cfg, tmp_path):
    probes = [choice_probe(image=tmp_path / "gone.png"), choice_probe(example_id="ex2")]
    table = client_for(chat_server).answer_probes(probes, answer_cfg, progress=False)
    assert list(table["status"]) == ["error", "ok"] and "gone.png" in table.iloc[0]["error"]
    assert table.iloc[0]["error_cause"] == "input"


def test_concurrency_stays_within_max_concurrency(answer_cfg):
    with ChatServer(latency=0.1) as server:
        client_for(server, max_concurrency=3).answer_probes(probe_set(12), answer_cfg, progress=False)
        assert 1 < server.max_in_flight <= 3


def test_results_do_not_depend_on_completion_order_or_on_the_slice(tmp_path, answer_cfg):
    rule, jitter = effusion_rule(), random.Random(0)

    def slow_rule(prompt, body):
        time.sleep(jitter.uniform(0, 0.03))  # replies finish in a scrambled order
        return rule(prompt, body)

    probes = probe_set(12, tmp_path)
    with ChatServer(answer=slow_rule) as server:
        concurrent = client_for(server, max_concurrency=6).answer_probes(probes, answer_cfg, progress=False)
        sequential = client_for(server, max_concurrency=1).answer_probes(probes, answer_cfg, progress=False)
        piece = client_for(server, max_concurrency=4).answer_probes(probes[3:8], answer_cfg, progress=False)
    pd.testing.assert_frame_equal(concurrent, sequential)
    pd.testing.assert_frame_equal(piece, concurrent.iloc[3:8].reset_index(drop=True))


def test_the_api_key_is_sent_but_never_shown(chat_server, answer_cfg, monkeypatch):
    from medexp.answers import EndpointUnusable

    monkeypatch.setenv("MEDEXP_TEST_API_KEY", "sk-test-secret-123")
    client = client_for(chat_server, api_key_env="MEDEXP_TEST_API_KEY")
    table = client.answer_probes(probe_set(2), answer_cfg, progress=False)
    assert {headers["Authorization"] for headers in chat_server.headers} == {"Bearer sk-test-secret-123"}
    assert "sk-test-secret-123" not in repr(client) + table.to_json()
    chat_server.fail("Case 00", Fault(401))
    with pytest.raises(EndpointUnusable) as refused:  # a refused key ends the answering at once
        client.answer_probes(probe_set(2), answer_cfg, progress=False)
    assert "HTTP 401" in str(refused.value) and "MEDEXP_TEST_API_KEY" in str(refused.value)
    assert "sk-test-secret-123" not in str(refused.value)
    no_key = client_for(chat_server)
    no_key.answer_probes(probe_set(1), answer_cfg, progress=False)
    assert "Authorization" not in chat_server.headers[-1]


def test_api_key_settings_are_checked_without_echoing_a_key(chat_server, monkeypatch):
    monkeypatch.delenv("MEDEXP_UNSET_KEY", raising=False)
    with pytest.raises(ValueError, match="environment variable MEDEXP_UNSET_KEY, which is not set"):
        client_for(chat_server, api_key_env="MEDEXP_UNSET_KEY")
    with pytest.raises(ValueError) as error:
        client_for(chat_server, api_key_env="sk-live-abc123")
    assert "sk-live-abc123" not in str(error.value) and "must name the environment variable" in str(error.value)


@pytest.mark.parametrize(("setting", "message"), [
    ({"base_url": "127.0.0.1:8000/v1"}, "http:// or https://"),
    ({"max_concurrency": 0}, "model.max_concurrency must be at least 1"),
    ({"max_retries": -1}, "model.max_retries must be at least 0"),
    ({"request_timeout": 0}, "model.request_timeout must be > 0"),
    ({"retry_backoff": -1}, "model.retry_backoff must be >= 0"),
])
def test_bad_client_settings_are_named(setting, message):
    with pytest.raises(ValueError, match=message):
        ChatClient(**{"base_url": "http://127.0.0.1:1/v1", "model": "m", **setting})


def test_likelihood_mode_and_duplicate_probes_are_refused(chat_server, answer_cfg):
    client = client_for(chat_server)
    with pytest.raises(ValueError, match="answer.mode=likelihood: a black-box model answers by generation only"):
        client.answer_probes(probe_set(1), dataclasses.replace(answer_cfg, mode=AnswerMode.likelihood))
    with pytest.raises(ValueError, match="duplicate probe ids"):
        client.answer_probes(probe_set(2) + probe_set(1), answer_cfg)
    assert chat_server.requests == []


def test_from_model_config_reads_the_composed_model(chat_server, answer_cfg):
    chat_server.answer = effusion_rule()
    model = compose(["model=openai_compatible", f"model.base_url={chat_server.base_url}", "model.name=qwen-local",
                     "model.max_concurrency=2", "model.retry_backoff=0.01"]).model
    table = answer_probes(probe_set(3), model, answer_cfg, progress=False)
    assert len(table) == 3 and {body["model"] for body in chat_server.requests} == {"qwen-local"}
    model.pretrained = "Qwen/Qwen2.5-VL-7B-Instruct"  # the served id wins over the config name
    client = ChatClient.from_model_config(model)
    client.answer_probes(probe_set(1), answer_cfg, progress=False)
    assert chat_server.requests[-1]["model"] == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert client.served_models == ["Qwen/Qwen2.5-VL-7B-Instruct"]  # what the server says it ran
    with pytest.raises(ValueError, match="has family qwen2_5_vl; the chat client serves family openai_compatible"):
        ChatClient.from_model_config(compose(["model=qwen2_5_vl"]).model)
