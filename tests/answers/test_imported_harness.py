"""Replies other harnesses wrote, in their own layouts (model.responses_format): lmms-eval samples
of a generation task, VLMEvalKit prediction sheets, LLaVA-Med answer files, each joined to the
cell's original probes by id or by question text, bad lines counted, nothing guessed."""

from __future__ import annotations

import json
import logging

import pandas as pd
import pytest

from medexp.answers import import_responses
from medexp.config import compose
from tests.answers.conftest import OPTIONS, choice_probe, released_as, text_probe
from tests.answers.judging import judged_import, judged_model_import

QUESTIONS = ["What modality is used to take this image?", "Which organ is abnormal?",
             "Where is the liver?", "What modality is used to take this image?"]  # 0 and 3 share a text
ANSWERS = ["CT", "Lung", "Left", "MRI"]


def slake_probes():
    """Original probes of four SLAKE questions (free text), the way the answering detectors make them."""
    return [text_probe(example_id=f"slake::test::{11934 + i}", kind="original", gold=ANSWERS[i], question=QUESTIONS[i],
                       upstream=11934 + i) for i in range(4)]


def lmms_eval_generation_line(doc_id: int, question: str, answer: str, qid: int, reply) -> str:
    """One line of lmms-eval's samples_<task>.jsonl for a generate_until task, with the keys its
    evaluator writes (the visual callable is not serialisable, so it is left out of arguments)."""
    gen_kwargs = {"max_new_tokens": 32, "temperature": 0, "top_p": None, "num_beams": 1, "until": ["\n\n"]}
    return json.dumps({
        "doc_id": doc_id, "doc": {"qid": qid, "question": question, "answer": answer, "answer_type": "OPEN"},
        "target": answer, "arguments": [f"{question}\nAnswer the question using a single word or phrase.",
                                        gen_kwargs, doc_id, "slake_en", "test"],
        "resps": [[reply]], "filtered_resps": [reply], "doc_hash": "a" * 64, "prompt_hash": "b" * 64,
        "target_hash": "c" * 64, "exact_match": float(reply == answer)})


def test_lmms_eval_generation_samples_join_by_question_and_count_an_ambiguous_text(tmp_path, answer_cfg, caplog):
    path = tmp_path / "samples_slake_en.jsonl"
    replies = ["CT", "Lung", "left lobe", "MRI"]
    path.write_text("\n".join(lmms_eval_generation_line(i, QUESTIONS[i], ANSWERS[i], 11934 + i, replies[i])
                              for i in range(4)) + "\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="medexp"):
        table = judged_import(path, slake_probes(), answer_cfg, fmt="lmms_eval")
    # questions 0 and 3 share their text: those two lines are ambiguous, never guessed
    assert "2 bad line(s) skipped (ambiguous 2)" in caplog.text and f"{path}:1: ambiguous" in caplog.text
    assert list(table["status"]) == ["error", "ok", "ok", "error"]
    assert list(table["response"])[1:3] == ["Lung", "left lobe"]
    assert list(table["correct"]) == [False, True, True, False]  # judge=read: "left lobe" states "Left"
    # joined by the doc's own id instead, every line lands
    by_qid = judged_import(path, slake_probes(), answer_cfg, fmt="lmms_eval", id_field="doc.qid", join="source_id")
    assert list(by_qid["status"]) == ["ok"] * 4 and list(by_qid["correct"]) == [True, True, True, True]


def vlmevalkit_sheet(rows: int = 4) -> pd.DataFrame:
    """A VLMEvalKit prediction sheet: the dataset TSV's columns without `image`, plus `prediction`."""
    frame = pd.DataFrame({
        "index": list(range(rows)), "question": [f"Question {i}?" for i in range(rows)],
        **{letter: [OPTIONS[k]] * rows for k, letter in enumerate("ABCD")},
        "answer": ["ABCD"[i % 4] for i in range(rows)], "category": "coarse perception",
        "l2-category": "image scene and topic", "bench": "MMStar",
    })
    frame["prediction"] = ["A", "The answer is (B).", "Failed to obtain answer: <class 'RuntimeError'> CUDA out of "
                           "memory", "D"][:rows]
    return frame


def mmstar_probes(rows: int = 4):
    return [choice_probe(example_id=f"mmstar::test::{i}", gold="ABCD"[i % 4], question=f"Question {i}?",
                         meta=released_as(i)) for i in range(rows)]


def test_a_vlmevalkit_tsv_sheet_joins_by_index_and_keeps_failed_rows_as_errors(tmp_path, answer_cfg):
    path = tmp_path / "Qwen2.5-VL-7B-Instruct_MMStar.tsv"
    sheet = vlmevalkit_sheet()
    extra = sheet.iloc[[0]].assign(index=99)  # an index of another dataset
    pd.concat([sheet, extra]).to_csv(path, sep="\t", index=False)  # as VLMEvalKit's dump() writes a .tsv
    table = judged_import(path, mmstar_probes(), answer_cfg, fmt="vlmevalkit")
    assert list(table["status"]) == ["ok", "ok", "error", "ok"]
    assert list(table["choice"]) == ["A", "B", None, "D"]
    assert list(table["correct"]) == [True, True, False, True]
    assert "CUDA out of memory" in table.iloc[2]["error"]


def test_a_vlmevalkit_xlsx_sheet_reads_like_its_tsv(tmp_path, answer_cfg):
    path = tmp_path / "Qwen2.5-VL-7B-Instruct_MMStar.xlsx"
    vlmevalkit_sheet().to_excel(path, index=False)
    table = judged_import(path, mmstar_probes(), answer_cfg, fmt="vlmevalkit")
    assert list(table["choice"]) == ["A", "B", None, "D"]


def test_a_harness_sheet_whose_options_or_gold_are_not_the_probes_is_refused(tmp_path, answer_cfg):
    path = tmp_path / "model_MMStar.tsv"
    sheet = vlmevalkit_sheet()
    sheet.loc[[1, 3], ["A", "B"]] = sheet.loc[[1, 3], ["B", "A"]].to_numpy()  # a release in another option order
    sheet.loc[0, "answer"] = "B"  # another gold
    sheet.to_csv(path, sep="\t", index=False)
    with pytest.raises(ValueError, match=r"3 of 4 joined rows carry other options or another gold than the cell's "
                                         r"probe .*row 1: gold 'B' and probe mmstar::test::0::original has gold 'A'; "
                                         r".*row 2: options \['Pleural effusion', 'Pneumonia'"):
        import_responses(path, mmstar_probes(), answer_cfg, fmt="vlmevalkit")
    retyped = vlmevalkit_sheet()
    retyped["A"] = retyped["A"].str.upper() + "  "  # case and spacing aside, the same options
    retyped.to_csv(path, sep="\t", index=False)
    assert list(judged_import(path, mmstar_probes(), answer_cfg, fmt="vlmevalkit")["correct"]) == [True, True, False,
                                                                                                   True]


def test_lmms_eval_samples_whose_target_is_not_the_gold_are_refused(tmp_path, answer_cfg):
    path = tmp_path / "20261202_samples_slake_en.jsonl"
    golds = {1: "Heart", 2: ANSWERS[2]}  # lmms-eval's copy holds another answer to question 1
    path.write_text("".join(lmms_eval_generation_line(i, QUESTIONS[i], gold, 11934 + i, gold) + "\n"
                            for i, gold in golds.items()))
    with pytest.raises(ValueError, match="1 of 2 joined rows .*gold 'Heart' and probe slake::test::11935::original has "
                                         "gold 'Lung'"):
        import_responses(path, slake_probes(), answer_cfg, fmt="lmms_eval")


def llava_med_line(question_id, prompt: str, text: str) -> str:
    """One line of LLaVA-Med's answer file, as llava/eval/model_vqa.py writes it."""
    return json.dumps({"question_id": question_id, "prompt": prompt, "text": text, "answer_id": "Vf9nGxqkUqRkFW8Z2ZTRLA",
                       "model_id": "llava-med-v1.5-mistral-7b", "metadata": {}})


def test_a_llava_med_answer_file_joins_by_question_id_and_counts_what_it_cannot(tmp_path, answer_cfg, caplog):
    path = tmp_path / "answer-file-llava-med.jsonl"
    lines = [llava_med_line(11934 + i, f"<image>\n{QUESTIONS[i]}", ANSWERS[i]) for i in range(3)]
    lines.append(llava_med_line(99999, "Is this a CT?", "yes"))  # another benchmark's question
    lines.append(json.dumps({"prompt": "no id", "text": "CT"}))
    lines.append("{truncated")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="medexp"):
        table = judged_import(path, slake_probes(), answer_cfg, fmt="llava_med")
    assert "3 bad line(s) skipped (unmatched 1, no id 1, not JSON 1)" in caplog.text
    assert list(table["status"]) == ["ok", "ok", "ok", "error"]  # the fourth question has no line
    assert table.iloc[3]["error"].startswith("no response imported for this probe")
    # by prompt text, the <image> placeholder set aside: 1 and 2 match; 0 shares its text with 3
    by_text = judged_import(path, slake_probes(), answer_cfg, fmt="llava_med", id_field="prompt", join="question")
    assert list(by_text["status"]) == ["error", "ok", "ok", "error"]


def test_a_harness_file_needs_original_probes(tmp_path, answer_cfg):
    path = tmp_path / "answers.jsonl"
    path.write_text(llava_med_line(11934, QUESTIONS[0], "CT") + "\n")
    shuffled = [choice_probe(example_id="slake::test::11934", kind="option_shuffle", variant="1")]
    with pytest.raises(ValueError, match="answers the questions as released, and this cell has no original probe"):
        import_responses(path, shuffled, answer_cfg, fmt="llava_med")


def test_a_responses_model_config_names_the_harness(tmp_path, answer_cfg):
    path = tmp_path / "answer-file.jsonl"
    path.write_text("\n".join(llava_med_line(11934 + i, QUESTIONS[i], ANSWERS[i]) for i in range(4)) + "\n")
    model = compose(["model=responses", f"model.responses_path={path}", "model.responses_format=llava_med"]).model
    table = judged_model_import(slake_probes(), model, answer_cfg)
    assert list(table["correct"]) == [True] * 4
