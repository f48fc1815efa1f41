"""How a model is asked: one section shared by every answering detector (MM-Detect, MedVIGIL,
paired perturbation, the overlap gap on answers), embedded in their schemas as ``answer:``. How its
replies are judged is the cell's ``judge:`` (:mod:`medexp.config.schemas.judge`).

Every arm of every comparison renders its prompts from this one section, so two arms differ only
in their probes, never in wording or decoding (DESIGN.md, "Answers and probes").
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from enum import Enum
from typing import Optional

from medexp.config.ranges import at_least, fraction


class AnswerMode(str, Enum):
    likelihood = "likelihood"  # white box: the option with the highest teacher-forced log-likelihood
    generate = "generate"  # greedy decoding (or a black-box API), then the cell's judge


@dataclass
class AnswerConfig:
    mode: AnswerMode = AnswerMode.generate
    max_new_tokens: int = at_least(8, 1)  # generated tokens per reply (sent as max_tokens to an API)
    # Greedy by default. Any other value is refused unless allow_sampling is true; then it is
    # sent as given and recorded with the cell's params. Never replaced by another value.
    temperature: float = at_least(0.0, 0.0)
    allow_sampling: bool = False
    seed: Optional[int] = None  # sent to APIs that accept a sampling seed; None: not sent
    system_prompt: Optional[str] = None  # a system turn before the question; None: no system turn
    # A multiple-choice probe: {question}, {options} (one option_line per option, in displayed
    # order) and optionally {letters} ("A, B, C, D").
    choice_template: str = "{question}\nOptions:\n{options}\nAnswer with the option's letter only."
    option_line: str = "{letter}. {text}"
    # A free-text probe (slot guessing, open questions): {question}.
    free_text_template: str = "{question}\nAnswer with a single word or phrase."
    # likelihood mode: compare mean log-likelihood per option token (true) or the sum (false).
    length_normalise: bool = True
    # A cell whose share of probes with a reply (an answer or a no-answer; an error is no reply) is below
    # this ends FAILED without a verdict, naming the causes. Never part of the response cache key.
    min_answered: float = fraction(0.95)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        """The rules a range cannot say (called by medexp.config.ranges.validate)."""
        try:
            _check_rules(node, path)
        except ValueError as error:
            return str(error)
        return None


_TEMPLATE_FIELDS = {
    "choice_template": ({"question", "options"}, {"letters"}),
    "option_line": ({"letter", "text"}, set()),
    "free_text_template": ({"question"}, set()),
}


def _template_fields(template: str, key: str, where: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as error:
        raise ValueError(f"{where}.{key}: {error} in {template!r} (write a literal brace as '{{{{' or '}}}}')") from None


def check_answer_config(cfg, where: str = "answer") -> None:
    """Fail with a message naming the key when ``cfg`` (an :class:`AnswerConfig` or its OmegaConf
    node) asks for something the answering layer must not do. Structured-config typing catches
    wrong types at composition; this catches wrong values (ranges and the rules below), and runs
    before any model is asked."""
    from omegaconf import OmegaConf

    from medexp.config.ranges import validate

    validate(cfg if OmegaConf.is_config(cfg) else OmegaConf.structured(cfg), where)


def _check_rules(cfg, where: str) -> None:
    if cfg.temperature != 0 and not cfg.allow_sampling:
        raise ValueError(
            f"{where}.temperature={cfg.temperature}: answers are greedy (temperature 0) unless "
            f"{where}.allow_sampling=true says sampling is intended; then the temperature is sent as given"
        )
    for key, (required, optional) in _TEMPLATE_FIELDS.items():
        fields = _template_fields(getattr(cfg, key), key, where)
        missing, unknown = required - fields, fields - required - optional
        if missing or unknown:
            allowed = sorted(required | optional)
            problem = f"lacks {sorted(missing)}" if missing else f"has unknown field(s) {sorted(unknown)}"
            raise ValueError(f"{where}.{key} {problem}; its fields are {allowed}: {getattr(cfg, key)!r}")
    if cfg.system_prompt is not None and not cfg.system_prompt.strip():
        raise ValueError(f"{where}.system_prompt is empty; use null for no system turn")

