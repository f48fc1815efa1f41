"""A LLaVA-Med answer file on VQA-RAD, in the exact form of LLaVA-Med's published ones (issue 48):
JSONL lines of ``question_id`` (the release's integer qid, e.g. ``10``), ``prompt`` (the question,
with LLaVA-Med's option list appended to a closed one), ``text`` (the reply, sentences included,
some opening with a ``Human:`` turn marker), ``answer_id``, ``model_id`` and ``metadata``, against
the OSF release with its real counts (451 test questions, 272 of them closed; 7 question texts
asked of two images each). It joins every line by default, by the release's own id; by question
text the appended options are set aside and only the 7 shared texts stay out, counted."""

from __future__ import annotations

import json
import logging

import pytest

from medexp.benchmarks import load_benchmark_from_config
from medexp.config import compose
from medexp.probes.twins import question_probe
from tests.benchmarks.upstream import vqa_rad_release_records, write_vqa_rad
from tests.answers.judging import judged_model_import

CLOSED_SUFFIX = " Please choose from the following two options: [yes, no]"
SHARED_TEXTS = ("Is this an MRI?", "Is there a fracture?", "Is the heart enlarged?", "Is this a CT scan?",
                "Is there free air?", "Is the liver normal?", "Are the lungs clear?")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The OSF release with the real counts; 7 closed question texts each asked of two test images."""
    records = vqa_rad_release_records()
    closed_test = [record for record in records if record["phrase_type"].startswith("test")
                   and record["answer_type"].strip() == "CLOSED"]
    for number, text in enumerate(SHARED_TEXTS):
        for record in closed_test[2 * number: 2 * number + 2]:
            record["question"] = text
    for record in records[::7]:  # images only these (test or train) questions show: a test image of them is in no other split
        record["image_name"] = f"synpic_only_{record['qid']}.jpg"
    root = write_vqa_rad(tmp_path_factory.mktemp("vqa_rad"), records)
    cache = tmp_path_factory.mktemp("cache")
    bench = compose(["bench=vqa_rad", f"bench.root={root}", f"paths.cache_dir={cache}"]).bench
    examples = load_benchmark_from_config(bench, cache).examples
    return root, cache, {example.meta["qid"]: example for example in examples}


def reply_for(example, number: int) -> str:
    """What LLaVA-Med wrote: the answer, a sentence, or a turn of the conversation it continued."""
    if example.meta["answer_type"] != "CLOSED":
        return example.answer if number % 3 else "I am not sure."
    return ("Yes" if number % 4 == 0 else "No." if number % 4 == 1
            else "Human: Based on the chest X-ray, there is no evidence of an aortic aneurysm." if number % 4 == 2
            else "Based on the image, yes.")


def llava_med_file(path, examples, prompt=lambda example: example.question) -> None:
    lines = []
    for number, example in enumerate(examples):
        closed = example.meta["answer_type"] == "CLOSED"
        lines.append(json.dumps({
            "question_id": example.meta["qid"],  # the integer qid, as LLaVA-Med's question file has it
            "prompt": prompt(example) + (CLOSED_SUFFIX if closed else ""),
            "text": reply_for(example, number), "answer_id": f"{number:022d}",
            "model_id": "llava-med-v1.5-mistral-7b", "metadata": {}}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def imported(path, examples, *overrides):
    model = compose(["model=responses", "model.name=llava_med", f"model.responses_path={path}",
                     "model.responses_format=llava_med", *overrides]).model
    answer = compose(["detector=perturbation_gap"]).detector.answer
    return judged_model_import([question_probe(example) for example in examples], model, answer)


def test_every_line_of_a_llava_med_answer_file_joins_by_the_releases_qid(release, tmp_path, caplog):
    root, _, by_qid = release
    examples = list(by_qid.values())
    assert len(examples) == 451 and sum(example.meta["answer_type"] == "CLOSED" for example in examples) == 272
    path = tmp_path / "test-answer-file.jsonl"
    llava_med_file(path, examples)
    with caplog.at_level(logging.WARNING, logger="medexp"):
        table = imported(path, examples)
    assert "bad line" not in caplog.text and "no imported response" not in caplog.text
    assert (table["status"] != "error").all()  # every line joined, every reply judged
    # judged as a reader would (judge=read, the default): a leading or restated yes/no commits, a
    # finding the question does not ask about and a refusal commit to nothing
    expected = [reader_verdict(example, number) for number, example in enumerate(examples)]
    assert list(table["verdict"]) == expected
    assert expected.count("correct") > 0 and expected.count("no_answer") > 0 and expected.count("wrong") > 0
    sentences = table["response"].str.startswith("Human: Based on")
    assert sentences.sum() == sum(number % 4 == 2 for number, example in enumerate(examples)
                                  if example.meta["answer_type"] == "CLOSED") > 0
    assert set(table.loc[sentences, "verdict"]) <= {"no_answer", "wrong"}


def reader_verdict(example, number: int) -> str:
    """What a reader makes of :func:`reply_for`'s reply: "Yes", "No.", "Based on the image, yes."
    answer a closed yes/no question and no other; a restated absence of an aortic aneurysm answers none of these
    questions; "I am not sure." refuses; an open reply that is the answer is right."""
    if example.meta["answer_type"] != "CLOSED":
        return "correct" if number % 3 else "no_answer"
    said = ("yes", "no", None, "yes")[number % 4]
    gold = str(example.answer).strip().lower()
    if gold not in ("yes", "no"):  # a question answered by a number or a name
        # a bare yes or no answers another question; the restated absence is read as an answer, a wrong one
        return "wrong" if said is None else "no_answer"
    return "no_answer" if said is None else "correct" if said == gold else "wrong"


def test_joined_by_question_text_the_appended_options_are_set_aside_and_shared_texts_counted(release, tmp_path, caplog):
    _, _, by_qid = release
    examples = list(by_qid.values())
    path = tmp_path / "test-answer-file.jsonl"
    llava_med_file(path, examples, prompt=lambda example: f"<image>\n{example.question}")
    with caplog.at_level(logging.WARNING, logger="medexp"):
        table = imported(path, examples, "model.responses_id_field=prompt", "model.responses_join=question")
    assert "14 bad line(s) skipped (ambiguous 14)" in caplog.text
    assert (table["status"] != "error").sum() == 451 - 14
    assert set(table.loc[table["status"] == "error", "error_cause"]) == {"not_imported"}


def test_a_partial_or_foreign_answer_file_says_so_with_counts(release, tmp_path, caplog):
    _, _, by_qid = release
    examples = list(by_qid.values())
    partial = tmp_path / "partial.jsonl"
    llava_med_file(partial, examples[:300])
    with caplog.at_level(logging.WARNING, logger="medexp"):
        table = imported(partial, examples)
    assert "151 of 451 probes have no imported response" in caplog.text
    assert (table["error_cause"] == "not_imported").sum() == 151
    foreign = tmp_path / "pathvqa-answers.jsonl"
    foreign.write_text("".join(json.dumps({"question_id": 90000 + i, "prompt": "What is shown?", "text": "tissue"}) + "\n"
                               for i in range(5)))
    with pytest.raises(ValueError, match=r"no usable line, 5 bad line\(s\) \(\{'unmatched': 5\}\); first: .*"
                                         r"question_id=90000 names no original probe"):
        imported(foreign, examples)


def test_the_answer_file_gets_its_overlap_gap_on_the_releases_split_overlap(release, tmp_path):
    """The audit's chain on a harness's file: VQA-RAD's own split overlap (a test image that is also
    a train image, by image_name, no pixel read) flags the questions, and the imported replies get
    their accuracy gap with its image-clustered interval, permutation p and MDE."""
    from medexp.kernel.cell import Cell
    from medexp.runner.evaluate import evaluate

    root, cache, by_qid = release
    examples = list(by_qid.values())
    path = tmp_path / "test-answer-file.jsonl"
    llava_med_file(path, examples)
    cfg = compose(["bench=vqa_rad", f"bench.root={root}", f"paths.cache_dir={cache}", "detector=overlap_gap_answers",
                   "flags@detector.flags=split_overlap", "detector.image_field=image_name", "model=responses",
                   "model.name=llava_med", f"model.responses_path={path}", "model.responses_format=llava_med"])
    metrics, _ = evaluate(cfg, Cell.from_config(cfg).seed(0))
    only_here = {example.meta["image_name"] for example in examples if example.meta["image_name"].startswith("synpic_only")}
    assert metrics["n_probes"] == metrics["n_answered"] == 451
    assert metrics["flags_n_questions"] == 451
    assert metrics["flags_n_questions_flagged"] == sum(example.meta["image_name"] not in only_here for example in examples)
    assert 0 < metrics["flags_n_questions_flagged"] < 451
    assert 0 < metrics["p_value"] <= 1 and metrics["mde"] > 0
    assert metrics["gap_ci_low"] <= metrics["gap"] <= metrics["gap_ci_high"]
