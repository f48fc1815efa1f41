"""medexp's own lines: probes out as plain JSONL, replies back as medexp's response JSONL.

Written: ``probes.jsonl``, one probe per line (``probe_id``, ``probe_set``, ``example_id``,
``kind``, ``question``, ``options`` (a list, or null for a free-text probe), ``prompt``: the text
the cell's answer settings render, ``image``: a path relative to the export folder, or null for a
probe asked without one, and ``gold``, the gold letter or text, for a script that scores on its
side), and the images under ``images/``. Any script can answer it.

Read: the reply JSONL medexp imports from anywhere (``model.responses_format=jsonl``, alias
``medexp``): one object per line naming its ``probe_id``, the raw reply under the first of
``model.reply_fields`` the file uses (``response`` by default), optionally ``status``, ``error``
and ``probe_set`` (copied from the probe's line: checked against the cell's probe set). The reply
field and the statuses are read by :mod:`medexp.answers.imported`, as for MedVIGIL's harness files.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from medexp.answers.formats.base import (
    PROBE_ID, PROBE_SET, BadLine, Export, HarnessFormat, Reading, ReplyRecord, copy_images, files_under, json_lines,
    write_json_lines,
)

PROBES = "probes.jsonl"


def write(export: Export) -> list[Path]:
    from medexp.answers.prompt import render_prompt

    images = copy_images(export.probes, export.out)
    lines = ({PROBE_ID: probe.probe_id, PROBE_SET: export.probe_set, "example_id": probe.example_id,
              "kind": probe.kind, "question": probe.question,
              "options": list(probe.options) if probe.options is not None else None,
              "prompt": render_prompt(probe, export.answer_cfg), "image": images.get(probe.probe_id),
              "gold": probe.gold} for probe in export.probes)
    return [write_json_lines(export.out / PROBES, lines)]


def read(reading: Reading) -> Iterator[ReplyRecord]:
    for path in files_under(reading.path, "*.jsonl"):
        for number, where, line in json_lines(path, reading.bad):
            if not isinstance(line.get(PROBE_ID), str) or not line[PROBE_ID]:
                reading.bad.add(BadLine(where, "no probe_id", f"no non-empty string probe_id in {sorted(line)}", number))
                continue
            yield number, where, line


FORMAT = HarnessFormat(
    name="jsonl",
    writes=f"{PROBES}: one probe per line (id, question, options, the rendered prompt, the image's path) and images/",
    reply_file="a JSONL file of replies: probe_id and response per line (status and error optional)",
    write=write,
    read=read,
)
