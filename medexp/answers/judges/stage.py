"""The judge stage: a response table (what a model said) judged into the judged table (what it
means), with its verdict counts, and the warnings a cell owes its reader.

- A row without a reply is an ``error`` verdict, out of every denominator, except a refusal the API
  or the harness recorded (cause ``refused``): a refusal is a no-answer, counted, never dropped.
- A choice a white-box model made by likelihood is its committed answer, whatever the judge.
- Every other reply is read by the cell's judge (``judge:``, :data:`medexp.answers.judges.JUDGES`);
  a costly judge's readings are kept by (judge, probe, reply) (:mod:`.cache`).

Metrics: ``n_verdict.<verdict>`` over the table and ``n_verdict.<arm>.<verdict>`` per arm (probe
kind), ``mean_score.<arm>`` where the judge gives a harness's per-reply credit; for a judge model,
``judge_agreement_read`` and ``judge_kappa_read`` (Cohen's kappa, scikit-learn) against
``judge=read`` on the same replies. Warnings: arms whose no-answer rates differ beyond chance
(:func:`no_answer_difference`), and a judge model agreeing with ``judge=read`` below
``judge.min_agreement``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from medexp.answers.judges import judge_declaration
from medexp.answers.judges.base import JudgeContext, Reading, Verdict, judged
from medexp.answers.judges.cache import VerdictCache, reply_key
from medexp.answers.table import JUDGED_COLUMNS, ErrorCause, Status, as_response_table
from medexp.config.schemas.judge import JudgeKind

log = logging.getLogger("medexp")

NO_ANSWER_ALPHA = 0.01  # family-wise level at which differing no-answer rates are reported
# What judged.parquet holds, under the names a reader looks for.
LOGGED = {"probe_id": "probe_id", "example_id": "example_id", "kind": "arm", "response": "reply",
          "committed": "committed", "verdict": "verdict", "judge": "judge", "reason": "reason", "score": "score"}


@dataclass
class JudgedAnswers:
    """A judged table (:data:`medexp.answers.table.JUDGED_COLUMNS`), its metrics and warnings."""

    table: pd.DataFrame
    metrics: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def record(self) -> pd.DataFrame:
        """judged.parquet: one row per probe, what was said beside what it means."""
        return self.table[list(LOGGED)].rename(columns=LOGGED).reset_index(drop=True)


def _settings(judge_cfg) -> dict:
    from omegaconf import OmegaConf

    if OmegaConf.is_config(judge_cfg):
        return OmegaConf.to_container(judge_cfg, resolve=True, enum_to_str=True)
    return {key: getattr(value, "value", value) for key, value in vars(judge_cfg).items()}


def _fixed_reading(row) -> Reading | None:
    """The reading of a row no judge reads: no reply, a recorded refusal, a choice by likelihood."""
    if row["status"] == Status.error.value:
        if row["error_cause"] == ErrorCause.refused.value:
            return Reading("", Verdict.no_answer, f"refused: {str(row['error'])[:120]}")
        return Reading("", Verdict.error, f"no reply ({row['error_cause']})")
    if row["choice"] is not None:
        return judged(str(row["choice"]), str(row["choice"]) == str(row["gold"]), "chosen by likelihood")
    return None


def _read(probes: Sequence, replies: Sequence[str], judge_cfg, cache_dir) -> list[Reading]:
    declaration = judge_declaration(judge_cfg.kind)
    context = JudgeContext(cache_dir)
    if not declaration.cached or not probes:
        return declaration.judge(probes, replies, judge_cfg, context)
    cache = VerdictCache(cache_dir, _settings(judge_cfg))
    keys = [reply_key(probe, reply) for probe, reply in zip(probes, replies)]
    kept = cache.get(keys)
    missing = [index for index, key in enumerate(keys) if key not in kept]
    if kept:
        log.info("judge %s: %d of %d verdicts kept from earlier cells", judge_cfg.name, len(probes) - len(missing),
                 len(probes))
    fresh = declaration.judge([probes[i] for i in missing], [replies[i] for i in missing], judge_cfg, context) \
        if missing else []
    cache.put({keys[index]: reading for index, reading in zip(missing, fresh)})
    kept.update({keys[index]: reading for index, reading in zip(missing, fresh)})
    return [kept[key] for key in keys]


def judge_responses(responses: pd.DataFrame, probes: Sequence, judge_cfg, cache_dir) -> JudgedAnswers:
    """The judged table of ``responses`` (a response table of ``probes``, in their order) under
    ``judge_cfg`` (the cell's ``judge:``), with its metrics and warnings."""
    probes = list(probes)
    # Records, not iterrows: a row Series would turn a missing choice (None) into NaN.
    readings: list[Reading | None] = [_fixed_reading(row) for row in responses.to_dict("records")]
    open_rows = [index for index, reading in enumerate(readings) if reading is None]
    replies = [str(responses["response"].iat[index] or "") for index in open_rows]
    for index, reading in zip(open_rows, _read([probes[i] for i in open_rows], replies, judge_cfg, cache_dir)):
        readings[index] = reading
    table = _judged_table(responses, readings, str(judge_cfg.name))
    metrics = verdict_counts(table)
    warnings = no_answer_difference({arm: rows["verdict"] for arm, rows in table.groupby("kind", sort=False)},
                                    "arms")[1]
    if JudgeKind(judge_cfg.kind) is JudgeKind.model and open_rows:
        agreement, lines = _agreement_with_read([probes[i] for i in open_rows], replies,
                                                [readings[i] for i in open_rows], float(judge_cfg.min_agreement))
        metrics.update(agreement)
        warnings += lines
    return JudgedAnswers(table, metrics, warnings)


def _judged_table(responses: pd.DataFrame, readings: list[Reading], name: str) -> pd.DataFrame:
    table = responses.copy()
    verdicts = [reading.verdict for reading in readings]
    table["committed"] = [reading.committed for reading in readings]
    table["verdict"] = [verdict.value for verdict in verdicts]
    table["judge"] = name
    table["reason"] = [reading.reason for reading in readings]
    table["score"] = [reading.score for reading in readings]
    table["correct"] = [verdict is Verdict.correct for verdict in verdicts]
    status = [Status.error if verdict is Verdict.error else Status.no_answer if verdict is Verdict.no_answer
              else Status.ok for verdict in verdicts]
    table["status"] = [value.value for value in status]
    table["choice"] = [reading.committed if value is Status.ok else None for reading, value in zip(readings, status)]
    judge_errors = [value is Status.error and raw == Status.ok.value for value, raw in zip(status, responses["status"])]
    # A no-reply keeps its message and cause, a recorded refusal too (a no-answer now, still counted
    # as n_refused); a judge's failure gets its own.
    table["error"] = [reading.reason if new else old
                      for reading, new, old in zip(readings, judge_errors, table["error"])]
    table["error_cause"] = [ErrorCause.judge.value if new else old for new, old in zip(judge_errors, table["error_cause"])]
    return as_response_table(table[list(JUDGED_COLUMNS)], list(responses["probe_id"]))


def verdict_counts(table: pd.DataFrame) -> dict[str, float]:
    """``n_verdict.<verdict>`` and ``n_verdict.<arm>.<verdict>`` (every verdict, zeros included),
    and ``mean_score.<arm>`` where the judge scored replies."""
    metrics = {f"n_verdict.{verdict.value}": float((table["verdict"] == verdict.value).sum()) for verdict in Verdict}
    for arm, rows in table.groupby("kind", sort=False):
        metrics.update({f"n_verdict.{arm}.{verdict.value}": float((rows["verdict"] == verdict.value).sum())
                        for verdict in Verdict})
        scores = rows["score"].dropna()
        if len(scores):
            metrics[f"mean_score.{arm}"] = float(scores.mean())
    return metrics


def no_answer_difference(groups: Mapping[str, pd.Series], what: str) -> tuple[dict[str, float], list[str]]:
    """Whether the no-answer rates of ``groups`` (name -> verdicts; error rows, with no reply, left
    out) differ beyond chance: each group against the first by Fisher's exact test, Bonferroni over
    the comparisons. Returns the smallest corrected p-value as ``no_answer_p.<what>`` and a warning
    per difference at :data:`NO_ANSWER_ALPHA`: a no-answer counts as not correct, so a group that
    refuses more scores lower for that reason alone."""
    from scipy.stats import fisher_exact

    counts = {name: (int((verdicts == Verdict.no_answer.value).sum()),
                     int(verdicts.isin([Verdict.correct.value, Verdict.wrong.value]).sum()))
              for name, verdicts in groups.items()}
    names = list(counts)
    if len(names) < 2:
        return {}, []
    first = names[0]
    corrected, warnings = {}, []
    for name in names[1:]:
        table = [counts[first], counts[name]]
        if min(sum(row) for row in table) == 0 or (table[0][0] + table[1][0]) == 0:
            continue
        p_value = min(1.0, float(fisher_exact(table).pvalue) * (len(names) - 1))
        corrected[name] = p_value
        if p_value < NO_ANSWER_ALPHA:
            rate = {key: counts[key][0] / sum(counts[key]) for key in (first, name)}
            warnings.append(f"no-answer rates differ between {what} {first} ({rate[first]:.1%}) and {name} "
                            f"({rate[name]:.1%}), Fisher p={p_value:.2g} (Bonferroni): a no-answer counts as not "
                            "correct, so the difference can bias the statistic; see judged.parquet")
    metrics = {f"no_answer_p.{what}": min(corrected.values())} if corrected else {}
    return metrics, warnings


def _agreement_with_read(probes: list, replies: list[str], readings: list[Reading],
                         min_agreement: float) -> tuple[dict[str, float], list[str]]:
    from sklearn.metrics import cohen_kappa_score

    from medexp.answers.judges.read import read_reply
    from medexp.config.schemas.judge import ReadJudgeConfig

    reader = ReadJudgeConfig(name="read", kind="read")
    pairs = [(reading.verdict.value, read_reply(probe, reply, reader).verdict.value)
             for probe, reply, reading in zip(probes, replies, readings) if reading.verdict is not Verdict.error]
    if not pairs:
        return {}, []
    agreement = sum(mine == theirs for mine, theirs in pairs) / len(pairs)
    mine, theirs = zip(*pairs)
    kappa = float(cohen_kappa_score(mine, theirs)) if len(set(mine) | set(theirs)) > 1 else 1.0
    warnings = [f"the judge model agrees with judge=read on {agreement:.1%} of {len(pairs)} replies, below "
                f"judge.min_agreement={min_agreement:g}; compare the two in judged.parquet"] \
        if agreement < min_agreement else []
    return {"judge_agreement_read": agreement, "judge_kappa_read": kappa}, warnings
