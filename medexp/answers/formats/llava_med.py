"""LLaVA-Med's evaluation files: a question file out, its answer file back.

Written: ``questions.jsonl``, the question file of LLaVA-Med's ``llava/eval/model_vqa.py``
(``--question-file questions.jsonl --image-folder <export folder> --answers-file answers.jsonl``):
``question_id`` (the probe id), ``image`` (a path relative to the export folder) and ``text``, the
prompt as the cell's answer settings render it, and ``images/``. ``model_vqa.py`` opens an image for
every question, so a probe set with probes asked without an image is refused for this format.

Read: the answer file ``model_vqa.py`` writes (``question_id``, ``prompt``, ``text``, ``answer_id``,
``model_id``, ``metadata``; the reply is ``text``). A question file (``question_id``, ``image``,
``text``, none of the answer file's own fields) holds the prompts in ``text`` and is refused: it
is not a file of answers. A file answering an export names its probes by ``question_id``, every
arm. LLaVA-Med's published answer files name the release's own id
(VQA-RAD's integer ``qid``, e.g. ``10``) and join the original probes by it; joined by question text
instead (``model.responses_id_field=prompt model.responses_join=question``) the option list
LLaVA-Med appends to a closed question (``Please choose from the following two options: [yes,
no]``) and ``<image>`` placeholders are set aside.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from medexp.answers.formats.base import (
    BadLine, Export, HarnessFormat, Reading, ReplyRecord, copy_images, image_files, join_originals, json_lines,
    reply_files, reply_record, write_json_lines,
)

QUESTIONS = "questions.jsonl"
OWN_ID = ("question_id", "source_id")  # a published answer file: the release's own id
ANSWER_FIELDS = ("answer_id", "model_id", "prompt")  # what model_vqa.py adds to a question's line


def write(export: Export) -> list[Path]:
    from medexp.answers.prompt import render_prompt

    blind = [probe for probe in export.probes if probe.image is None]
    if blind:
        kinds = sorted({probe.kind for probe in blind})
        raise ValueError(f"format=llava_med: LLaVA-Med's model_vqa.py opens an image for every question, and "
                         f"{len(blind)} probe(s) of this set are asked without one (kinds {kinds}); export them "
                         "as openai_batch, lmms_eval or jsonl")
    images = copy_images(export.probes, export.out)
    lines = ({"question_id": probe.probe_id, "image": images[probe.probe_id],
              "text": render_prompt(probe, export.answer_cfg)} for probe in export.probes)
    return [write_json_lines(export.out / QUESTIONS, lines), *image_files(export.out, images)]


def read(reading: Reading) -> Iterator[ReplyRecord]:
    for path in reply_files(reading, "*.jsonl"):
        rows = list(json_lines(path, reading.bad))
        if rows and not any(field in row for _, _, row in rows for field in ANSWER_FIELDS):
            raise ValueError(f"{path} is a LLaVA-Med question file (its lines have {sorted(rows[0][2])}, none of the "
                             f"answer file's {list(ANSWER_FIELDS)}): its text is the prompt, not a reply. Run "
                             "llava/eval/model_vqa.py on it and name the --answers-file it writes")
        if not reading.exported:
            yield from join_originals(reading, rows, OWN_ID, lambda row: (row.get("text"), None))
            continue
        for number, where, row in rows:  # an answer file of an exported question file
            if not isinstance(row.get("text"), str):
                reading.bad.add(BadLine(where, "no reply field", f"no text in {sorted(row)}", number))
                continue
            yield number, where, reply_record(row.get("question_id"), row["text"])


FORMAT = HarnessFormat(
    name="llava_med",
    writes=f"{QUESTIONS}: LLaVA-Med's question file (question_id, image, text) and images/",
    reply_file="LLaVA-Med's answer file (question_id, prompt, text, answer_id, model_id, metadata)",
    write=write,
    read=read,
)
