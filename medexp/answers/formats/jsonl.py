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
    PROBE_ID, Export, HarnessFormat, Reading, ReplyRecord, copy_images, image_files, named_lines, probe_line,
    write_json_lines,
)

PROBES = "probes.jsonl"


def write(export: Export) -> list[Path]:
    images = copy_images(export.probes, export.out)
    lines = ({**probe_line(probe, export, images.get(probe.probe_id)), "example_id": probe.example_id}
             for probe in export.probes)
    return [write_json_lines(export.out / PROBES, lines), *image_files(export.out, images)]


def read(reading: Reading) -> Iterator[ReplyRecord]:
    return named_lines(reading, PROBE_ID)


FORMAT = HarnessFormat(
    name="jsonl",
    writes=f"{PROBES}: one probe per line (id, question, options, the rendered prompt, the image's path) and images/",
    reply_file="a JSONL file of replies: probe_id and response per line (status and error optional)",
    write=write,
    read=read,
)
