"""Exports of probes that show other labels than A, B, C (renumbered_options): every format puts
the shown labels in front of the model, VLMEvalKit (whose multiple-choice prompt letters the
options itself) through its open-ended dataset with medexp's rendered prompt for every arm, and
the replies, in those labels, come back and are read in them."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from medexp.answers.formats import FORMATS, harness_format
from medexp.answers.formats.base import WORDING, Export
from medexp.answers.prompt import render_prompt
from medexp.probes.base import Probe
from tests.answers.conftest import write_png
from tests.answers.exports import manifest_of
from tests.answers.judging import judged_import
from tests.answers.test_harness_formats import batch_line

OPTIONS = ("Kidney", "Liver", "Spleen", "Lung")
PROBE_SET = "0123abcd" + "0" * 24


def arms(tmp_path, image=True) -> list[Probe]:
    """Two examples, each as released (letters) and renumbered (1, 2, 3, 4); the gold is Liver."""
    probes = []
    for index in range(2):
        picture = write_png(tmp_path / f"scan{index}.png", seed=index) if image else None
        for kind, labels in (("original", None), ("renumbered", ("1", "2", "3", "4"))):
            probe_id = f"ex{index}::{kind}" + ("::0" if labels else "")
            probes.append(Probe(probe_id, f"ex{index}", kind, "Which organ is enlarged?", "B", image=picture,
                                options=OPTIONS, labels=labels))
    return probes


def export(fmt: str, probes, answer_cfg, out):
    out.mkdir(exist_ok=True)
    return harness_format(fmt).write(Export(probes, answer_cfg, out, "medexp_demo_renumbered_options_0123abcd",
                                            PROBE_SET, "served-id"))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_shows_the_model_the_labels_of_each_probe(fmt, tmp_path, answer_cfg):
    written = export(fmt, arms(tmp_path), answer_cfg, tmp_path / fmt)
    text = "\n".join(path.read_text(encoding="utf-8") for path in written if path.suffix in (".jsonl", ".tsv", ".py"))
    for shown in ("A. Kidney", "B. Liver", "1. Kidney", "2. Liver"):
        assert shown in text.replace("\\n", "\n"), (fmt, shown)


def test_vlmevalkit_asks_every_arm_as_the_rendered_prompt_in_its_open_ended_dataset(tmp_path, answer_cfg):
    probes = arms(tmp_path)
    written = export("vlmevalkit", probes, answer_cfg, tmp_path / "out")
    assert [path.name for path in written] == ["medexp_demo_renumbered_options_0123abcd_openended.tsv"]
    rows = pd.read_csv(written[0], sep="\t", dtype=str)
    assert "A" not in rows and list(rows["probe_id"]) == [probe.probe_id for probe in probes]
    assert list(rows["question"]) == [render_prompt(probe, answer_cfg) for probe in probes]
    assert list(rows["answer"]) == ["B"] * 4  # the positional gold, as every format writes it
    assert harness_format("vlmevalkit").carried(probes) == WORDING  # the export carries medexp's wording now
    assert harness_format("vlmevalkit").carried(probes[::2]) == ()  # letters only: VLMEvalKit's own prompt


def test_vlmevalkit_replies_in_the_labels_come_back_and_are_read_in_them(tmp_path, answer_cfg):
    probes = arms(tmp_path)
    dataset = export("vlmevalkit", probes, answer_cfg, tmp_path / "out")[0]
    sheet = pd.read_csv(dataset, sep="\t", dtype=str).drop(columns=["image"])
    sheet["prediction"] = ["B", "2", "B", "B"]  # ex1 replies the released letter to its numbered probe
    path = tmp_path / "out" / f"my_model_{dataset.stem}.csv"
    sheet.to_csv(path, index=False)
    table = judged_import(path, probes, answer_cfg, fmt="vlmevalkit", probe_set=PROBE_SET,
                          manifest=manifest_of(tmp_path / "out", "vlmevalkit", PROBE_SET, len(probes)))
    assert list(table["status"]) == ["ok", "ok", "ok", "no_answer"]
    assert list(table["choice"]) == ["B", "B", "B", None] and list(table["correct"]) == [True, True, True, False]


def test_vlmevalkit_refuses_labelled_sets_asked_without_an_image(tmp_path, answer_cfg):
    with pytest.raises(ValueError, match="a set with relabelled options asks every choice as free text"):
        export("vlmevalkit", arms(tmp_path, image=False), answer_cfg, tmp_path / "out")


def test_batch_replies_in_the_labels_come_back_and_are_read_in_them(tmp_path, answer_cfg):
    probes = arms(tmp_path)
    export("openai_batch", probes, answer_cfg, tmp_path / "out")
    requests = [json.loads(line) for line in (tmp_path / "out" / "requests.jsonl").read_text().splitlines()]
    assert "2. Liver" in requests[1]["body"]["messages"][0]["content"][1]["text"]
    output = tmp_path / "out" / "batch_output.jsonl"
    output.write_text("".join(batch_line(request["custom_id"], reply, number=number) + "\n"
                              for number, (request, reply) in enumerate(zip(requests, ["B", "(2)", "C", "3"]))))
    table = judged_import(output, probes, answer_cfg, fmt="openai_batch", probe_set=PROBE_SET,
                          manifest=manifest_of(tmp_path / "out", "openai_batch", PROBE_SET, len(probes)))
    assert list(table["choice"]) == ["B", "B", "C", "C"] and list(table["correct"]) == [True, True, False, False]
