"""Judged tables for tests of the detectors: rows as a model gives them (a reply, or no reply),
judged by the cell's default judge, as every answering cell judges them."""

from __future__ import annotations

from collections.abc import Sequence

from medexp.answers.judges.stage import judge_responses
from medexp.answers.table import response_table
from medexp.config.schemas.judge import ReadJudgeConfig

READ = ReadJudgeConfig(name="read", kind="read")
# A reply that commits to no option nor answer (judge=read: a no-answer), even with a refusal option.
NO_ANSWER_REPLY = "It could be either of them."


def judged_table(rows: Sequence[dict], probes: Sequence, judge_cfg=READ):
    """The judged table of response rows (``response_row``, ``error_row``) of ``probes``."""
    probes = list(probes)
    return judge_responses(response_table(list(rows), [probe.probe_id for probe in probes]), probes, judge_cfg,
                           None).table


def judged(responses, probes, judge_cfg=READ):
    """A response table of ``probes`` judged by ``judge_cfg``."""
    return judge_responses(responses, list(probes), judge_cfg, None).table


def judged_import(path, probes, *args, **kwargs):
    """The replies of the file ``path`` to ``probes`` (``import_responses``' arguments), judged."""
    from medexp.answers.imported import import_responses

    probes = list(probes)
    return judged(import_responses(path, probes, *args, **kwargs), probes)


def judged_model_import(probes, *args, **kwargs):
    """The replies a ``responses`` model config names (``import_model_responses``' arguments), judged."""
    from medexp.answers.imported import import_model_responses

    probes = list(probes)
    return judged(import_model_responses(probes, *args, **kwargs), probes)
