"""A stand-in for a harness, for tests: answers an export of ``python -m medexp.export`` with a
transformers checkpoint (the demo answering model), reading only the exported files and writing
the output the real harness writes. It imports no medexp code.

    python tests/harness/demo_model_harness.py <jsonl|vlmevalkit|lmms_eval> <model folder> <export folder>...

Each export's output goes into its folder, beside its manifest: ``replies.jsonl`` (jsonl), or the
folder ``replies/`` (the sheets, the samples file).

- ``jsonl``: reads ``probes.jsonl`` (each probe's ``prompt`` and ``image``), writes a reply JSONL
  (``probe_id``, ``response``, ``probe_set``).
- ``vlmevalkit``: reads every dataset TSV of the export as VLMEvalKit does (an ``image`` cell of at
  most 64 characters names the row whose base64 image it shares; a file without an ``image`` column
  is a text dataset), builds the prompt as VLMEvalKit's MCQ datasets do (``Question: ...``,
  ``Options:``, ``A. ...`` lines, ``Please select the correct answer from the options above.``; a
  question alone without options), and writes each dataset's prediction sheet
  ``<model>_<dataset>.tsv`` (the dataset's columns without ``image``, plus ``prediction``) into the
  output folder.
- ``lmms_eval``: reads the task folder as lmms-eval does: the task YAML's data file and generation
  settings, and the task's own ``utils.py`` (``doc_to_text``, ``doc_to_visual``), and writes
  ``<date>_samples_<task>.jsonl`` as lmms-eval 0.7.3's ``--log_samples`` writes it (no doc; the
  reply as a string in ``filtered_resps``; the prompt as ``input``).

The model is asked as medexp's white-box generation asks it: the checkpoint's chat template with
the image first, greedy decoding of at most ``max_new_tokens``, one probe at a time, the reply
decoded without special tokens and stripped.
"""

import base64
import hashlib
import importlib.util
import io
import json
import sys
from pathlib import Path

import pandas as pd
import torch
import yaml
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

VLMEVALKIT_OPTIONS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class Model:
    def __init__(self, folder: str):
        self.processor = AutoProcessor.from_pretrained(folder)
        self.model = AutoModelForImageTextToText.from_pretrained(folder).eval()
        tokenizer = self.processor.tokenizer
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def ask(self, text: str, image, max_new_tokens: int) -> str:
        content = ([{"type": "image"}] if image is not None else []) + [{"type": "text", "text": text}]
        prompt = self.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                                    tokenize=False)
        kwargs = {"text": [prompt], "return_tensors": "pt", "padding": True, "add_special_tokens": False}
        if image is not None:
            kwargs["images"] = [[image]]
        inputs = self.processor(**kwargs)
        with torch.inference_mode():
            output = self.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                         pad_token_id=self.pad_id)
        prompt_ids, tokens = inputs["input_ids"][0], output[0]
        if len(tokens) >= len(prompt_ids) and torch.equal(tokens[: len(prompt_ids)], prompt_ids):
            tokens = tokens[len(prompt_ids):]
        return self.processor.tokenizer.decode(tokens, skip_special_tokens=True).strip()


def rgb(path_or_bytes) -> Image.Image:
    source = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
    with Image.open(source) as image:
        return image.convert("RGB")


def answer_jsonl(export: Path, model: Model, output: Path) -> None:
    """Replies to probes.jsonl, decoded with the manifest's max_new_tokens (a script's own choice)."""
    max_new_tokens = json.loads((export / "manifest-jsonl.json").read_text())["answer"]["max_new_tokens"]
    with (export / "probes.jsonl").open(encoding="utf-8") as probes, output.open("w", encoding="utf-8") as replies:
        for line in probes:
            probe = json.loads(line)
            image = rgb(export / probe["image"]) if probe["image"] else None
            reply = model.ask(probe["prompt"], image, max_new_tokens)
            replies.write(json.dumps({"probe_id": probe["probe_id"], "response": reply,
                                      "probe_set": probe["probe_set"]}) + "\n")


def vlmevalkit_prompt(row: pd.Series) -> str:
    """The text of VLMEvalKit's ImageMCQDataset / TextMCQDataset.build_prompt (a question alone without options)."""
    options = {letter: row[letter] for letter in VLMEVALKIT_OPTIONS if letter in row and not pd.isna(row[letter])}
    if not options:
        return row["question"]
    prompt = f"Question: {row['question']}\nOptions:\n"
    prompt += "".join(f"{letter}. {text}\n" for letter, text in options.items())
    return prompt + "Please select the correct answer from the options above. \n"


def answer_vlmevalkit(export: Path, model: Model, output: Path) -> None:
    """Prediction sheets of every dataset TSV; VLMEvalKit's model wrappers choose their own
    decoding: here the manifest's max_new_tokens, greedy."""
    max_new_tokens = json.loads((export / "manifest-vlmevalkit.json").read_text())["answer"]["max_new_tokens"]
    output.mkdir(parents=True, exist_ok=True)
    for dataset in sorted(export.glob("*.tsv")):
        data = pd.read_csv(dataset, sep="\t")
        images = {}
        if "image" in data:
            by_index = {str(index): str(image) for index, image in zip(data["index"], data["image"])}
            images = {index: by_index[image] if len(image) <= 64 else image for index, image in by_index.items()}
        predictions = []
        for _, row in data.iterrows():
            image = rgb(base64.b64decode(images[str(row["index"])])) if images else None
            predictions.append(model.ask(vlmevalkit_prompt(row), image, max_new_tokens))
        sheet = data.drop(columns=["image"], errors="ignore").assign(prediction=predictions)
        sheet.to_csv(output / f"demo_model_{dataset.stem}.tsv", sep="\t", index=False)


def _task_yaml(folder: Path) -> dict:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    return yaml.load(next(folder.glob("*.yaml")).read_text(), Loader=Loader)


def answer_lmms_eval(export: Path, model: Model, output: Path) -> None:
    folder = next(path.parent for path in export.glob("*/utils.py"))
    task = _task_yaml(folder)
    spec = importlib.util.spec_from_file_location("task_utils", folder / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    generation = task["generation_kwargs"]
    data_file = Path(task["dataset_kwargs"]["data_files"]["test"])
    output.mkdir(parents=True, exist_ok=True)
    # lmms-eval 0.7's samples file: <date>_samples_<task>.jsonl, each sample without its doc, the
    # reply flattened into filtered_resps, the prompt as input (EvaluationTracker.save_results_samples)
    samples_path = output / f"20261128_000000_samples_{task['task']}.jsonl"
    with data_file.open(encoding="utf-8") as docs, samples_path.open("w", encoding="utf-8") as samples:
        for doc_id, line in enumerate(docs):
            doc = json.loads(line)
            text, visuals = utils.doc_to_text(doc), utils.doc_to_visual(doc)
            reply = model.ask(text, visuals[0] if visuals else None, generation["max_new_tokens"])
            doc_hash = hashlib.sha256(json.dumps(doc, indent=2, ensure_ascii=False).encode()).hexdigest()
            samples.write(json.dumps({
                "doc_id": doc_id, "target": str(doc["gold"]), "filtered_resps": reply, "token_counts": [None],
                "doc_hash": doc_hash, **({"input_media": [doc["image"]]} if doc["image"] else {}),
                **utils.process_results(doc, [reply]), "input": text}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    torch.set_num_threads(1)
    fmt, model_folder, *exports = sys.argv[1:]
    answer = {"jsonl": answer_jsonl, "vlmevalkit": answer_vlmevalkit, "lmms_eval": answer_lmms_eval}[fmt]
    loaded = Model(model_folder)
    for export_folder in map(Path, exports):
        answer(export_folder, loaded, export_folder / ("replies.jsonl" if fmt == "jsonl" else "replies"))
