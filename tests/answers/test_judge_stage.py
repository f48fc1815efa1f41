"""The judge stage (issue 55): what a model said kept apart from what it means, every verdict on
record with its counts, no-answers counted and compared, and a judge model whose verdicts are
cached by (judge, probe, reply), whose failures are never verdicts and whose agreement with
judge=read is reported."""

from __future__ import annotations

from math import comb

import pytest

from medexp.answers import ErrorCause, error_row, response_row, response_table
from medexp.answers.judges.stage import judge_responses, no_answer_difference, verdict_counts
from medexp.config import compose
from tests.answers.conftest import choice_probe, text_probe
from tests.answers.server import ChatServer, Fault, prompt_text


def _judge(name: str, *overrides: str):
    return compose([f"judge={name}", *overrides]).judge


def _responses():
    probes = [choice_probe("e1", gold="B"), choice_probe("e2", gold="B"), choice_probe("e3", gold="B"),
              choice_probe("e4", gold="B"), text_probe("e5", gold="effusion")]
    rows = [response_row(probes[0], "I would go with B, the effusion."),
            error_row(probes[1], ErrorCause.timeout, "no reply within 60 s"),
            error_row(probes[2], ErrorCause.refused, "content filter", "I can't help with that."),
            response_row(probes[3], "C", "C", option_logliks=[-3.0, -2.0, -1.0, -4.0]),
            response_row(probes[4], "The missing word is effusion.")]
    return probes, response_table(rows, [probe.probe_id for probe in probes])


def test_the_judged_table_keeps_the_reply_and_says_what_it_means(tmp_path):
    probes, responses = _responses()
    judged = judge_responses(responses, probes, _judge("read"), tmp_path)
    table = judged.table
    assert list(table["response"]) == list(responses["response"])  # what the model said, untouched
    assert list(table["verdict"]) == ["correct", "error", "no_answer", "wrong", "correct"]
    assert list(table["status"]) == ["ok", "error", "no_answer", "ok", "ok"]
    assert list(table["committed"]) == ["B", "", "", "C", "effusion"]
    assert list(table["correct"]) == [True, False, False, False, True]
    assert table["reason"][3] == "chosen by likelihood" and "refused" in table["reason"][2]
    assert list(table["judge"].unique()) == ["read"]
    record = judged.record()
    assert list(record.columns) == ["probe_id", "example_id", "arm", "reply", "committed", "verdict", "judge",
                                    "reason", "score"]
    # the strict judge finds no letter in the first sentence and a wrong whole answer in the last;
    # the rows no judge reads stay as they are
    strict = judge_responses(responses, probes, _judge("exact"), tmp_path).table
    assert list(strict["verdict"]) == ["no_answer", "error", "no_answer", "wrong", "wrong"]


def test_verdict_counts_per_arm():
    probes, responses = _responses()
    table = judge_responses(responses, probes, _judge("read"), None).table
    counts = verdict_counts(table)
    assert counts["n_verdict.correct"] == 2 and counts["n_verdict.no_answer"] == 1 and counts["n_verdict.error"] == 1
    assert counts["n_verdict.original.correct"] == 1 and counts["n_verdict.original.wrong"] == 1
    assert counts["n_verdict.slot_mask.correct"] == 1 and counts["n_verdict.slot_mask.wrong"] == 0


def _fisher_two_sided(a: int, b: int, c: int, d: int) -> float:
    """Fisher's exact test on [[a, b], [c, d]] by hand: the hypergeometric probabilities of every
    table with the same margins no more likely than the observed one."""
    row, column, n = a + b, a + c, a + b + c + d
    def p(x):
        return comb(row, x) * comb(n - row, column - x) / comb(n, column)
    observed = p(a)
    return sum(p(x) for x in range(max(0, column - (n - row)), min(row, column) + 1) if p(x) <= observed * (1 + 1e-9))


def test_no_answer_rates_that_differ_beyond_chance_are_warned_about():
    import pandas as pd

    same = {"original": pd.Series(["no_answer"] * 2 + ["correct"] * 38), "shuffled": pd.Series(["no_answer"] * 3 +
                                                                                                 ["wrong"] * 37)}
    metrics, warnings = no_answer_difference(same, "arms")
    assert metrics["no_answer_p.arms"] == pytest.approx(_fisher_two_sided(2, 38, 3, 37)) and not warnings
    apart = {"original": pd.Series(["no_answer"] * 2 + ["correct"] * 38 + ["error"] * 5),
             "shuffled": pd.Series(["no_answer"] * 20 + ["wrong"] * 20)}
    metrics, warnings = no_answer_difference(apart, "arms")
    assert metrics["no_answer_p.arms"] == pytest.approx(_fisher_two_sided(2, 38, 20, 20))  # errors left out
    assert len(warnings) == 1 and "original (5.0%) and shuffled (50.0%)" in warnings[0]
    # three groups: each against the first, Bonferroni over the two comparisons
    three = {**apart, "third": pd.Series(["no_answer"] * 2 + ["wrong"] * 38)}
    assert no_answer_difference(three, "arms")[0]["no_answer_p.arms"] == \
        pytest.approx(min(1.0, 2 * _fisher_two_sided(2, 38, 20, 20)))


def _judge_rule(prompt: str, body: dict) -> str:
    reply = prompt.split("Reply: ", 1)[1]
    if "pneumothorax" in reply.lower():
        return "A"  # option A is Pneumonia in conftest's OPTIONS: a judge that disagrees with read
    if "effusion" in reply.lower():
        return "B"
    return "NONE"


def test_a_judge_model_is_asked_once_per_reply_and_its_failures_are_never_verdicts(tmp_path):
    probes = [choice_probe(f"e{i}", gold="B") for i in range(4)]
    replies = ["It shows a pleural effusion.", "Pleural effusion, clearly.", "I cannot see any image.",
               "There is a pneumothorax."]
    responses = response_table([response_row(probe, reply) for probe, reply in zip(probes, replies)],
                               [probe.probe_id for probe in probes])
    with ChatServer(answer=_judge_rule) as server:
        server.fail("Pleural effusion, clearly", Fault(status=503))
        judge = _judge("model", f"judge.model.base_url={server.base_url}", "judge.model.name=judge-llm",
                       "judge.model.max_retries=0", "judge.model.preflight=false")
        first = judge_responses(responses, probes, judge, tmp_path)
        assert list(first.table["verdict"]) == ["correct", "error", "no_answer", "wrong"]
        assert first.table["error_cause"][1] == "judge" and "503" in first.table["error"][1]
        assert len(server.requests) == 4
        # read agrees on rows 0 (correct) and 2 (no_answer) and not on row 3 (read: B, correct): 2 of 3
        assert first.metrics["judge_agreement_read"] == pytest.approx(2 / 3)
        assert any("agrees with judge=read on 66.7% of 3 replies" in warning for warning in first.warnings)
        prompt = prompt_text(server.requests[0])
        assert "Question: What does the radiograph show?" in prompt and "B. Pleural effusion" in prompt
        assert server.requests[0]["temperature"] == 0.0 and server.requests[0]["max_tokens"] == 16
        second = judge_responses(responses, probes, judge, tmp_path)
        assert len(server.requests) == 5  # only the failed reply was asked again
        assert list(second.table["verdict"]) == ["correct", "correct", "no_answer", "wrong"]
        other_prompt = _judge("model", f"judge.model.base_url={server.base_url}", "judge.model.name=judge-llm",
                              "judge.model.max_retries=0", "judge.model.preflight=false",
                              "judge.prompt='Q: {question} {options} R: {reply} Reply: {reply}'")
        judge_responses(responses, probes, other_prompt, tmp_path)
        assert len(server.requests) == 9  # another judge (its prompt) is another cache key


def test_a_judge_model_prompt_must_hold_its_fields():
    from medexp.config.ranges import ConfigRangeError, validate

    cfg = compose(["judge=model", "judge.prompt='Judge: {reply}'"])
    with pytest.raises(ConfigRangeError, match=r"judge.prompt must use exactly the fields"):
        validate(cfg)


def test_every_judge_kind_has_one_declaration_a_schema_and_a_config_file():
    from medexp.answers.judges import JUDGES, judge_declaration
    from medexp.config import conf_dir
    from medexp.config.schemas.judge import JUDGE_SCHEMAS, JudgeKind

    assert set(JUDGES) == {kind.value for kind in JudgeKind} == set(JUDGE_SCHEMAS)
    for kind in JudgeKind:
        declaration = judge_declaration(kind)
        assert declaration.kind == kind.value and declaration.schema is JUDGE_SCHEMAS[kind.value]
        assert callable(declaration.judge)
        assert compose([f"judge={kind.value}"]).judge.kind == kind.value
    assert {path.stem for path in (conf_dir() / "judge").glob("*.yaml")} == set(JUDGES)
    with pytest.raises(ValueError, match=r"no judge of kind 'oracle'; judges: \['exact'"):
        judge_declaration("oracle")
