"""Inspect (inspect-ai, the UK AI Security Institute's evaluation framework): a task file out, its
eval log back.

Written: ``<name>.py``, an Inspect task file (``@task`` ``<name>``), its dataset ``<name>.jsonl``
(one line per probe: ``probe_id``, ``probe_set``, ``kind``, ``question``, ``options``, ``prompt``,
the text the cell's answer settings render, ``image``, a path relative to the export folder or
null, and ``gold``) and ``images/``. Each probe is a sample: its id the probe id, its input the
chat medexp's own client sends (the system turn when configured, then one user turn holding the
image before the prompt text, or the text alone), its target the gold, its metadata the probe id,
probe set and kind; the task's ``GenerateConfig`` is the cell's decoding (``max_tokens``,
``temperature``, ``seed``). Inspect's ``exact()`` scorer is its own score only: medexp judges the
replies itself on import. Run it against any model Inspect reaches, e.g. an OpenAI-compatible
server::

    cd <out> && inspect eval <name>.py --model openai/<served id> --model-base-url <url>/v1 --log-dir logs

(Inspect 0.3.69 takes the task file by a path relative to the working directory.)

Read: the eval log(s) Inspect writes (``<log-dir>/<time>_<task>_<id>.eval``, or ``.json`` with
``--log-format json``; a file, or the log folder), read with Inspect's own ``read_eval_log``. A
sample's reply is its ``output.completion``; a sample whose ``error`` is set is an error row of the
cause its message names, one stopped by a content filter a refusal. Samples of an exported task
name their probe by ``id`` (every arm) and carry the probe set in their metadata; samples of a
task of Inspect's own (run on the release) join the original probes by ``id`` (the release's id),
their ``target`` checked against the probe's gold.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from medexp.answers.formats.base import (
    DECODING, PROBE_ID, PROBE_SET, WORDING, Carried, Export, HarnessFormat, Reading, ReplyRecord, copy_images,
    image_files, join_originals, probe_line, reply_files, reply_record, write_json_lines, write_text,
)

LOGS = ("*.eval", "*.json")  # Inspect's log formats (eval: its zip, the default; json)
OWN_ID = ("id", "source_id")  # a task of Inspect's own: the sample id is the release's id

TASK_FILE = '''"""An Inspect task written by python -m medexp.export (probe set {probe_set}): each sample is one probe.

cd {folder} && inspect eval {task_file} --model openai/<served id> --model-base-url <url>/v1 --log-dir logs
"""

import json
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ContentImage, ContentText, GenerateConfig
from inspect_ai.scorer import exact
from inspect_ai.solver import generate

FOLDER = Path(__file__).resolve().parent
DATA = {data!r}
SYSTEM_PROMPT = {system_prompt!r}
CONFIG = GenerateConfig(**{config!r})


def probe_sample(line):
    """The probe as medexp's client asks it: the system turn, then the image before the prompt text."""
    text = line["prompt"]
    content = [ContentImage(image=str(FOLDER / line["image"])), ContentText(text=text)] if line["image"] else text
    system = [ChatMessageSystem(content=SYSTEM_PROMPT)] if SYSTEM_PROMPT is not None else []
    return Sample(id=line["probe_id"], input=[*system, ChatMessageUser(content=content)], target=line["gold"],
                  metadata={{"probe_id": line["probe_id"], "probe_set": line["probe_set"], "kind": line["kind"]}})


@task
def {task_name}():
    with open(FOLDER / DATA, encoding="utf-8") as lines:
        samples = [probe_sample(json.loads(line)) for line in lines if line.strip()]
    return Task(dataset=MemoryDataset(samples, name={name!r}), solver=generate(), scorer=exact(), config=CONFIG,
                metadata={{"probe_set": {probe_set!r}}})
'''


def task_name(name: str) -> str:
    """The export's name as a Python identifier (the ``@task`` function Inspect names the task by)."""
    return re.sub(r"\W", "_", name)


def write(export: Export) -> list[Path]:
    images = copy_images(export.probes, export.out)
    lines = (probe_line(probe, export, images.get(probe.probe_id)) for probe in export.probes)
    data = write_json_lines(export.out / f"{export.name}.jsonl", lines)
    answer = export.answer_cfg
    config: dict[str, Any] = {"max_tokens": int(answer.max_new_tokens), "temperature": float(answer.temperature)}
    if answer.seed is not None:
        config["seed"] = int(answer.seed)
    task_file = export.out / f"{export.name}.py"
    text = TASK_FILE.format(probe_set=export.probe_set, folder=shlex.quote(str(export.out.resolve())),
                            task_file=shlex.quote(task_file.name),
                            data=data.name, system_prompt=answer.system_prompt, config=config,
                            task_name=task_name(export.name), name=export.name)
    return [write_text(task_file, text), data, *image_files(export.out, images)]


def read(reading: Reading) -> Iterator[ReplyRecord]:
    for path in reply_files(reading, *LOGS):
        rows = list(_sample_rows(path))
        if reading.exported:
            for number, where, row in rows:
                yield number, where, _reply_record(row)
        else:
            yield from join_originals(reading, rows, OWN_ID, _reply, lambda row: Carried(gold=_target(row)))


def _sample_rows(path: Path) -> Iterator[tuple[int, str, dict]]:
    """Each sample of the eval log at ``path`` as a plain dict of what the import reads (Inspect's own reader)."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError as error:
        raise ValueError(f"{path}: reading an Inspect eval log needs inspect-ai (in requirements.lock; "
                         "pip install 'medexp[inspect]')") from error
    try:
        log = read_eval_log(str(path))
    except Exception as error:  # Inspect raises its own errors for a file that is not one of its logs
        raise ValueError(f"{path}: not an Inspect eval log ({type(error).__name__}: {error})") from error
    for number, sample in enumerate(log.samples or [], 1):
        output = sample.output
        yield number, f"{path}: sample {number} (id {sample.id!r}, epoch {sample.epoch})", {
            "id": sample.id, "target": sample.target, "metadata": dict(sample.metadata or {}),
            "completion": output.completion if output is not None else None,
            "stop_reason": output.stop_reason if output is not None and output.choices else None,
            "error": sample.error.message if sample.error is not None else None}


def _reply(row: dict) -> tuple[Any, str | None]:
    """A sample's reply (``output.completion``) and the error Inspect recorded instead."""
    if row["error"]:
        return "", str(row["error"])
    return row["completion"], None


def _target(row: dict) -> Any:
    return row["target"] if isinstance(row["target"], str) else None


def _reply_record(row: dict) -> dict:
    """The reply record of a sample of an exported task (see the module docstring)."""
    from medexp.answers.table import ErrorCause, cause_of_message

    metadata = row.get("metadata") or {}
    probe_id, probe_set = metadata.get(PROBE_ID, row.get("id")), metadata.get(PROBE_SET)
    reply, error = _reply(row)
    if error is not None:
        return reply_record(probe_id, "", probe_set, cause_of_message(error).value, f"Inspect: {error}")
    if row["stop_reason"] == "content_filter":
        return reply_record(probe_id, reply or "", probe_set, ErrorCause.refused.value,
                            "Inspect: the model's content filter stopped the reply")
    return reply_record(probe_id, reply if isinstance(reply, str) else "", probe_set)


FORMAT = HarnessFormat(
    name="inspect_ai",
    writes="an Inspect task file <name>.py, its dataset <name>.jsonl and images/",
    reply_file="Inspect's eval log(s) (<log-dir>/*.eval or *.json), or the log folder",
    write=write,
    read=read,
    carries=WORDING + DECODING,
)
