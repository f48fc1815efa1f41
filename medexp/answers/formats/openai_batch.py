"""The OpenAI Batch API's files: requests out, the batch output back.

Written: ``requests.jsonl``, one request per probe, the input file of OpenAI's Batch API (and of
the batch endpoints that copy it) and of vLLM's offline ``python -m vllm.entrypoints.openai.run_batch
-i requests.jsonl -o output.jsonl --model <id>``: ``custom_id`` (the probe id), ``method`` POST,
``url`` ``/v1/chat/completions`` and ``body``, the very request medexp's own client sends
(:func:`medexp.answers.prompt.chat_request`: the cell's wording, the image as a base64 data URL,
temperature 0 unless sampling is allowed, ``max_tokens``).

Read: the batch output JSONL. Each line names its request by ``custom_id``; its reply is
``response.body.choices[0].message.content`` read as the chat client reads a reply (text parts
joined, a refusal or a content filter an error row of cause ``refused``, any other shape
``malformed``); a line whose ``error`` is set, or whose ``response.status_code`` is not 200, is an
error row whose cause follows the status code (429 rate limited, 5xx, other 4xx) or the error's
code and message. Output lines come back in any order; the reader does not care.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from medexp.answers.formats.base import (
    DECODING, WORDING, Export, HarnessFormat, Reading, ReplyRecord, named_lines, reply_record, write_json_lines,
)

REQUESTS = "requests.jsonl"
CHAT_URL = "/v1/chat/completions"


def write(export: Export) -> list[Path]:
    from medexp.answers.prompt import chat_request

    requests = ({"custom_id": probe.probe_id, "method": "POST", "url": CHAT_URL,
                 "body": chat_request(probe, export.answer_cfg, export.model_id)} for probe in export.probes)
    return [write_json_lines(export.out / REQUESTS, requests)]


def read(reading: Reading) -> Iterator[ReplyRecord]:
    for number, where, line in named_lines(reading, "custom_id"):
        yield number, where, _reply(line["custom_id"], line)


def _reply(custom_id: str, line: dict) -> dict:
    """The reply record of one output line (see the module docstring)."""
    from medexp.answers.openai_client import AnswerError, reply_text
    from medexp.answers.table import ErrorCause, cause_of_message

    error, response = line.get("error"), line.get("response")
    if error:
        message = _message(error)
        return reply_record(custom_id, "", status=cause_of_message(message).value, error=f"batch error: {message}")
    if not isinstance(response, dict):
        return reply_record(custom_id, "", status=ErrorCause.malformed.value,
                            error="malformed batch line: no response object and no error")
    status_code, body = response.get("status_code"), response.get("body")
    if status_code != 200:
        cause = _status_cause(status_code)
        message = _message(body.get("error") if isinstance(body, dict) else body)
        return reply_record(custom_id, "", status=cause.value, error=f"HTTP {status_code}: {message}")
    try:
        return reply_record(custom_id, reply_text(body))
    except AnswerError as problem:
        return reply_record(custom_id, problem.text, status=problem.cause.value, error=str(problem))


def _message(error: Any) -> str:
    if isinstance(error, dict):
        parts = [str(error[key]) for key in ("code", "message") if error.get(key)]
        return ": ".join(parts) or "an error object without code or message"
    return str(error) if error else "no message"


def _status_cause(status_code: Any):
    from medexp.answers.table import ErrorCause

    if not isinstance(status_code, int):
        return ErrorCause.malformed
    if status_code == 429:
        return ErrorCause.rate_limited
    return ErrorCause.http_5xx if status_code >= 500 else ErrorCause.http_4xx


FORMAT = HarnessFormat(
    name="openai_batch",
    writes=f"{REQUESTS}: the OpenAI Batch API input (also vLLM's run_batch -i), one chat-completions request per probe",
    reply_file="the batch output JSONL (OpenAI's output file, or vLLM run_batch -o)",
    write=write,
    read=read,
    carries=WORDING + DECODING,
)
