"""White-box answering through a transformers scorer: by likelihood, or by greedy generation.

* ``likelihood``, multiple choice: every option label the prompt shows (the letters, or a probe's
  own labels: 1, 2, ...) is scored teacher-forced as the answer to the rendered prompt (the image,
  then :func:`medexp.answers.prompt.render_prompt`); the label with the highest log-likelihood is
  the reply and its positional letter the choice; ``option_logliks`` keeps them all.
* ``likelihood``, free text (slot guessing): the probe lists its ``candidates`` in meta; with a
  ``cloze`` text (``[MASK]`` where the word goes) each candidate fills the mask and the completed
  text is scored by the language model (a cloze test: the candidate that makes the text most
  likely); without one, each candidate is scored as the answer to the prompt.
* ``generate``: greedy decoding of at most ``max_new_tokens``; the reply is kept as written, for
  the cell's judge (:mod:`medexp.answers.judges`).

``length_normalise`` compares mean log-probabilities per answer token instead of sums. Every
row comes back ``ok`` (a choice by likelihood, or a generated reply); a probe whose image cannot
be read raises, as scoring does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from medexp.answers.prompt import render_prompt
from medexp.answers.table import response_row, response_table
from medexp.benchmarks.base import Example
from medexp.benchmarks.options import LETTERS

MASK = "[MASK]"


def likelihood_answers(scorer, probes: Sequence, answer_cfg):
    """The response table of ``probes`` answered by likelihood (see the module docstring)."""
    probes = list(probes)
    rows = []
    choice_probes = [probe for probe in probes if probe.is_choice]
    values = _option_scores(scorer, choice_probes, answer_cfg) if choice_probes else {}
    for probe in probes:
        if probe.is_choice:
            scores = values[probe.probe_id]
            best = int(np.argmax(scores))
            # the reply is the label the model scored highest; the choice its positional letter, as the gold is
            rows.append(response_row(probe, probe.shown_labels[best], LETTERS[best], option_logliks=scores))
        else:
            candidates, scores = _candidate_scores(scorer, probe, answer_cfg)
            choice = candidates[int(np.argmax(scores))]
            rows.append(response_row(probe, choice, choice, option_logliks=scores))
    return response_table(rows, [probe.probe_id for probe in probes])


def generated_answers(scorer, probes: Sequence, answer_cfg):
    """The response table of ``probes`` answered by greedy generation."""
    probes = list(probes)
    prompts = [_as_example(probe, index, render_prompt(probe, answer_cfg), "") for index, probe in enumerate(probes)]
    replies = scorer.generate(prompts, int(answer_cfg.max_new_tokens))
    return response_table([response_row(probe, reply) for probe, reply in zip(probes, replies)],
                          [probe.probe_id for probe in probes])


def _as_example(probe, index: int, question: str, answer: str, suffix: str = "") -> Example:
    return Example(example_id=f"{probe.probe_id}{suffix}", position=index, image=probe.image, question=question,
                   answer=answer)


def _score_column(answer_cfg) -> str:
    return "mean_logprob" if answer_cfg.length_normalise else "sum_logprob"


def _option_scores(scorer, probes: list, answer_cfg) -> dict[str, list[float]]:
    """Each probe's per-letter log-likelihoods, from one scoring pass over every (probe, letter)."""
    examples = []
    for index, probe in enumerate(probes):
        prompt = render_prompt(probe, answer_cfg)
        examples += [_as_example(probe, index, prompt, label, f"::{label}") for label in probe.shown_labels]
    table = scorer.score_examples(examples)
    column = table[_score_column(answer_cfg)].to_numpy(dtype=np.float64)
    scores: dict[str, list[float]] = {}
    offset = 0
    for probe in probes:
        count = len(probe.options)
        scores[probe.probe_id] = column[offset : offset + count].tolist()
        offset += count
    return scores


def _candidate_scores(scorer, probe, answer_cfg) -> tuple[list[str], list[float]]:
    candidates = list(probe.meta.get("candidates") or [])
    if not candidates:
        raise ValueError(f"{probe.probe_id}: a free-text probe answered by likelihood needs meta['candidates'] "
                         "(or set answer.mode=generate)")
    cloze = probe.meta.get("cloze")
    if cloze is not None:
        if MASK not in cloze:
            raise ValueError(f"{probe.probe_id}: its cloze text has no {MASK}: {cloze!r}")
        texts = [cloze.replace(MASK, candidate, 1) for candidate in candidates]
        totals = scorer.score_texts(texts, context_length=1024, stride=512, batch_size=len(texts))
        if answer_cfg.length_normalise:
            lengths = [max(1, len(scorer.tokenizer(text, add_special_tokens=False)["input_ids"])) for text in texts]
            totals = np.asarray(totals) / np.asarray(lengths)
        return candidates, [float(value) for value in totals]
    prompt = render_prompt(probe, answer_cfg)
    examples = [_as_example(probe, i, prompt, candidate, f"::{i}") for i, candidate in enumerate(candidates)]
    table = scorer.score_examples(examples)
    return candidates, table[_score_column(answer_cfg)].astype(float).tolist()
