"""The OpenAI Batch API's files: requests out, the batch output back.

Written: the input file(s) of OpenAI's Batch API (and of the batch endpoints that copy it) and of
vLLM's offline ``python -m vllm.entrypoints.openai.run_batch -i requests.jsonl -o output.jsonl
--model <id>``, one request per probe: ``custom_id`` (the probe id), ``method`` POST, ``url``
``/v1/chat/completions`` and ``body``, the very request medexp's own client sends
(:func:`medexp.answers.prompt.chat_request`: the cell's wording, the image as a base64 data URL,
temperature 0 unless sampling is allowed, ``max_tokens``). With ``reasoning_model=true`` the body
holds ``max_completion_tokens`` and no temperature, which OpenAI's reasoning models require. The
Batch API takes at most 50,000 requests and 200 MB per input file: the requests are split into
shards within ``batch_max_requests`` and ``batch_max_bytes`` (those limits by default), written as
``requests.jsonl`` when one file holds them all, else ``requests-<i>-of-<n>.jsonl``, one batch each;
a single request larger than the byte limit is refused.

Read: the batch output JSONL, or a folder of the batches' output and error files (``*.jsonl``; the
export's request shards and any other file of requests are left out). Each line names its request
by ``custom_id``; its reply is
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
    DECODING, WORDING, Export, HarnessFormat, Reading, ReplyRecord, named_lines, reply_files, reply_record, write_text,
)

REQUESTS = "requests.jsonl"
SHARD = "requests-{index:0{width}d}-of-{count}.jsonl"
CHAT_URL = "/v1/chat/completions"
# The Batch API's limits on one input file (https://platform.openai.com/docs/guides/batch)
OPTIONS = {"batch_max_requests": 50_000, "batch_max_bytes": 200_000_000, "reasoning_model": False}


def write(export: Export) -> list[Path]:
    import json

    from medexp.answers.prompt import chat_request

    options = {**OPTIONS, **export.options}
    lines = []
    for probe in export.probes:
        body = chat_request(probe, export.answer_cfg, export.model_id)
        if options["reasoning_model"]:  # reasoning models reject max_tokens and any temperature but the default
            body.pop("temperature")
            body["max_completion_tokens"] = body.pop("max_tokens")
        request = {"custom_id": probe.probe_id, "method": "POST", "url": CHAT_URL, "body": body}
        lines.append(json.dumps(request, ensure_ascii=False) + "\n")
    shards = split_shards(lines, int(options["batch_max_requests"]), int(options["batch_max_bytes"]))
    if len(shards) == 1:
        return [write_text(export.out / REQUESTS, "".join(shards[0]))]
    width = len(str(len(shards)))
    return [write_text(export.out / SHARD.format(index=index, width=width, count=len(shards)), "".join(shard))
            for index, shard in enumerate(shards, 1)]


def split_shards(lines: list[str], max_requests: int, max_bytes: int) -> list[list[str]]:
    """The request lines in order, cut into shards of at most ``max_requests`` lines and
    ``max_bytes`` bytes (UTF-8) each; a ValueError for a line that alone exceeds ``max_bytes``."""
    if max_requests < 1 or max_bytes < 1:
        raise ValueError(f"batch_max_requests={max_requests}, batch_max_bytes={max_bytes}: both must be positive")
    shards: list[list[str]] = [[]]
    size = 0
    for line in lines:
        length = len(line.encode("utf-8"))
        if length > max_bytes:
            raise ValueError(f"format=openai_batch: one request is {length} bytes, over batch_max_bytes={max_bytes} "
                             "(its image inline as base64): no input file can hold it")
        if shards[-1] and (len(shards[-1]) >= max_requests or size + length > max_bytes):
            shards.append([])
            size = 0
        shards[-1].append(line)
        size += length
    return shards


def read(reading: Reading) -> Iterator[ReplyRecord]:
    outputs = [path for path in reply_files(reading, "*.jsonl") if not _is_requests(path)]
    if not outputs:
        raise FileNotFoundError(f"{reading.path}: only Batch input files (requests) here, no output or error file")
    for number, where, line in named_lines(reading, "custom_id", outputs):
        yield number, where, _reply(line["custom_id"], line)


def _is_requests(path: Path) -> bool:
    """Whether ``path`` is a Batch input file: its first line a request (``url`` and ``body``), not
    an output line (``response``, ``error``)."""
    import json

    with open(path, encoding="utf-8-sig", errors="replace") as lines:
        for text in lines:
            if text.strip():
                try:
                    first = json.loads(text)
                except json.JSONDecodeError:
                    return False
                return isinstance(first, dict) and "body" in first and "url" in first and "response" not in first
    return False


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
    writes=f"{REQUESTS} (or requests-<i>-of-<n>.jsonl shards within the Batch API's limits): the OpenAI Batch API "
           "input (also vLLM's run_batch -i), one chat-completions request per probe",
    reply_file="the batch output JSONL (OpenAI's output file, or vLLM run_batch -o), or a folder of output and "
               "error files",
    write=write,
    read=read,
    carries=WORDING + DECODING,
    options=OPTIONS,
)
