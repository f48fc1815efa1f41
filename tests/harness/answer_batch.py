"""A batch runner for tests: answers an OpenAI Batch input file (requests.jsonl, as
``python -m medexp.export format=openai_batch`` writes it) against an OpenAI-compatible server and
writes the Batch API's output file, one line per request, as OpenAI's batch output and vLLM's
``run_batch`` write it. It reads nothing but the exported file: it knows no probe, no cell, no
medexp (standard library only).

    python tests/harness/answer_batch.py <requests.jsonl> <server root, e.g. http://127.0.0.1:8000> <output.jsonl>

A line whose request the server refuses gets ``response.status_code`` and the server's error body;
a request that cannot be sent gets ``error`` instead, as the Batch API records them.
"""

import json
import sys
import urllib.error
import urllib.request


def answer(request: dict, root: str, number: int) -> dict:
    line = {"id": f"batch_req_{number:06d}", "custom_id": request["custom_id"], "response": None, "error": None}
    data = json.dumps(request["body"]).encode("utf-8")
    http = urllib.request.Request(root + request["url"], data=data, method=request["method"],
                                  headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(http, timeout=30) as reply:
            status, body = reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as refused:
        status, body = refused.code, json.loads(refused.read() or b"{}")
    except OSError as failure:
        line["error"] = {"code": "connection_error", "message": str(failure)}
        return line
    line["response"] = {"status_code": status, "request_id": f"req_{number:06d}", "body": body}
    return line


def main(requests_path: str, root: str, output_path: str) -> None:
    with open(requests_path, encoding="utf-8") as requests, open(output_path, "w", encoding="utf-8") as output:
        for number, text in enumerate(requests):
            output.write(json.dumps(answer(json.loads(text), root.rstrip("/"), number)) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
