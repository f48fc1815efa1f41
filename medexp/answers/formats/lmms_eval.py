"""lmms-eval: a task folder out, its logged samples back.

Written: a task folder ``<name>/`` that lmms-eval's task loader reads with
``--include_path <export folder> --tasks <name>``: ``<name>.yaml`` (a ``generate_until`` task over
the local data file, its generation settings the cell's: ``max_new_tokens``, temperature 0,
``do_sample: false``), ``<name>.jsonl`` (one doc per probe: ``probe_id``, ``probe_set``, ``kind``,
``question``, ``options``, ``prompt``, the text the cell's answer settings render, ``image``, a
path relative to the task folder or "", and ``gold``), ``utils.py`` (the functions the YAML names:
``doc_to_visual`` opens the doc's image, none for a probe asked without one; ``doc_to_text`` is the
doc's prompt, so every arm is worded as medexp words it; ``process_results`` a strict exact match,
lmms-eval's own score only: medexp judges the replies itself on import) and ``images/``. The YAML
names the data file by its absolute path (the ``datasets`` library reads a relative one from the
working directory): move the folder and that line follows it.

Read: ``<date>_samples_<task>.jsonl`` as lmms-eval writes it with ``--log_samples`` (a file, or
the output folder, searched for ``*samples_*.jsonl``); the reply is ``filtered_resps`` (lmms-eval
0.7 writes a generation task's reply there as a string), else ``resps``, unwrapped from the lists
older versions wrote. lmms-eval 0.7 leaves the doc out of a sample (only ``doc_id``, ``target``,
``input``, ``doc_hash`` and the task's metrics stay), so a sample of an exported task names its
probe by ``doc_id``, its place in the exported data file, which is the probe set's order; the
task's name (in the file name) carries the probe set's hash, and each sample's ``target`` must be
its probe's gold, else the file is refused (another probe set, or its docs in another order).
Older versions keep the doc: there ``doc.probe_id`` names the probe. Samples of lmms-eval's own
task (its ``doc_id`` indexes its own copy of the data) join the original probes by question text:
``doc.question``, or where the doc is not kept the prompt (``input``), the instruction lmms-eval
appends to it set aside.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from medexp.answers.formats.base import (
    PROBE_ID, PROBE_SET, WORDING, BadLine, Carried, Export, HarnessFormat, Reading, ReplyRecord, copy_images,
    image_files, join_originals, json_lines, no_manifest, probe_line, reply_files, reply_record, write_json_lines,
    write_text,
)

OWN_ID = ("doc.question", "question")  # lmms-eval's own task: its doc_id indexes its copy, not the release
# An exported task's name, medexp_<bench>_<detector>_<the probe set's hash, 8 digits> (medexp.export)
EXPORTED_TASK = re.compile(r"medexp_.+_(?P<probe_set>[0-9a-f]{8})")

TASK_HEADER = """# An lmms-eval task written by python -m medexp.export (probe set {probe_set}).
# lmms-eval --model <model> --model_args <...> --include_path {include} --tasks {name} --log_samples --output_path <out>
"""


class FunctionTag(str):
    """A YAML scalar lmms-eval's task loader reads as a function of the task's utils.py (``!function utils.<name>``)."""


def task_yaml(export: Export, data_file: Path) -> str:
    """The task's YAML, written by PyYAML (a path holding ``: `` or ``#`` stays one quoted scalar)."""
    import yaml

    class TaskDumper(yaml.SafeDumper):
        pass

    TaskDumper.add_representer(FunctionTag, lambda dumper, tag: dumper.represent_scalar("!function", str(tag)))
    answer = export.answer_cfg
    task = {
        "task": export.name, "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data_file)}},
        "test_split": "test", "output_type": "generate_until",
        "doc_to_visual": FunctionTag("utils.doc_to_visual"), "doc_to_text": FunctionTag("utils.doc_to_text"),
        "doc_to_target": "gold", "process_results": FunctionTag("utils.process_results"),
        "generation_kwargs": {"max_new_tokens": int(answer.max_new_tokens), "temperature": float(answer.temperature),
                              "do_sample": float(answer.temperature) > 0},
        "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}],
        "metadata": {"version": 0.0, "probe_set": export.probe_set},
    }
    header = TASK_HEADER.format(probe_set=export.probe_set, include=shlex.quote(str(export.out.resolve())),
                                name=export.name)
    return header + yaml.dump(task, Dumper=TaskDumper, sort_keys=False, allow_unicode=True)


UTILS = '''"""The functions of an lmms-eval task written by python -m medexp.export: each doc is one probe."""

from pathlib import Path

from PIL import Image

TASK_FOLDER = Path(__file__).resolve().parent


def doc_to_visual(doc):
    """The probe's image (a path relative to this folder); none for a probe asked without one."""
    if not doc.get("image"):
        return []
    return [Image.open(TASK_FOLDER / doc["image"]).convert("RGB")]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    """The prompt as medexp renders it: the same wording for every arm of the detector."""
    return doc["prompt"]


def process_results(doc, results):
    """lmms-eval's own score, a strict exact match; medexp judges the replies itself on import."""
    reply = results[0].strip() if results else ""
    return {"exact_match": float(reply == doc["gold"])}
'''


def write(export: Export) -> list[Path]:
    folder = export.out / export.name
    folder.mkdir(parents=True, exist_ok=True)
    images = copy_images(export.probes, folder)
    docs = (probe_line(probe, export, images.get(probe.probe_id, "")) for probe in export.probes)
    data = write_json_lines(folder / f"{export.name}.jsonl", docs)
    task = write_text(folder / f"{export.name}.yaml", task_yaml(export, data.resolve()))
    utils = write_text(folder / "utils.py", UTILS)
    return [task, data, utils, *image_files(folder, images)]


def read(reading: Reading) -> Iterator[ReplyRecord]:
    for path in reply_files(reading, "*samples_*.jsonl"):
        rows = list(json_lines(path, reading.bad))
        task = EXPORTED_TASK.fullmatch(path.name.split("samples_", 1)[-1].removesuffix(".jsonl"))
        if not reading.exported and task is not None:
            raise no_manifest(reading, str(path), f"the samples name task {task.group(0)}")
        if not reading.exported:
            kept_doc = any(isinstance(sample.get("doc"), dict) for _, _, sample in rows)
            own = OWN_ID if kept_doc else ("input", "question")
            yield from join_originals(reading, rows, own, lambda sample: (_reply(sample), None), _carried)
            continue
        probe_set = task.group("probe_set") if task else None
        for number, where, sample in rows:  # an exported task's samples
            probe_id = _probe_id(sample) or _probe_by_position(reading, sample, where)
            reply = _reply(sample)
            if not probe_id:
                reading.bad.add(BadLine(where, "no probe_id", "a sample of an exported task without doc.probe_id or "
                                                              "a doc_id of the exported data file", number))
            elif not isinstance(reply, str):
                reading.bad.add(BadLine(where, "no reply field", "no text in filtered_resps or resps", number))
            else:
                doc = sample.get("doc") if isinstance(sample.get("doc"), dict) else {}
                yield number, where, reply_record(probe_id, reply, doc.get(PROBE_SET) or probe_set)


def _carried(sample: dict) -> Carried:
    """The gold a sample of lmms-eval's own task carries: its ``target``."""
    target = sample.get("target")
    return Carried(gold=target if isinstance(target, (str, int)) and not isinstance(target, bool) else None)


def _probe_id(sample: dict) -> Any:
    doc = sample.get("doc")
    return doc.get(PROBE_ID) if isinstance(doc, dict) else None


def _probe_by_position(reading: Reading, sample: dict, where: str) -> str | None:
    """The probe a sample without its doc answers: the ``doc_id``-th of the probe set, whose gold
    its ``target`` must be (else the samples are of other docs, or in another order: refused)."""
    doc_id = sample.get("doc_id")
    if not isinstance(doc_id, int) or not 0 <= doc_id < len(reading.probes):
        return None
    probe = reading.probes[doc_id]
    if "target" in sample and str(sample["target"]) != str(probe.gold):
        raise ValueError(f"{where}: doc_id {doc_id} has target {sample['target']!r}, and this cell's probe {doc_id} "
                         f"({probe.probe_id}) has gold {probe.gold!r}: the samples answer other docs than the cell's "
                         "probes, or in another order")
    return probe.probe_id


def _reply(sample: dict) -> Any:
    """A generation task's reply: ``filtered_resps`` (after the task's filters), else ``resps``,
    unwrapped from the lists older lmms-eval versions wrote around it."""
    for name in ("filtered_resps", "resps"):
        value = sample.get(name)
        while isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str):
            return value
    return None


FORMAT = HarnessFormat(
    name="lmms_eval",
    writes="an lmms-eval task folder <name>/: the task YAML, its data file, utils.py and images/",
    reply_file="lmms-eval's samples_<task>.jsonl (--log_samples), or its output folder",
    write=write,
    read=read,
    carries=WORDING + ("max_new_tokens", "temperature"),
)
