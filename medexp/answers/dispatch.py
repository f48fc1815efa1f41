"""Which answering path a model takes, and the cache in front of it.

A model of family ``responses`` reads its answers from a file (nothing to compute or cache); an
``openai_compatible`` model asks its server (generation only); every other family is a white-box
transformers model answering by ``likelihood`` or ``generate`` (``answer.mode``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from omegaconf import OmegaConf


def model_answers(model_cfg, model_key: dict, scorer: Callable, probes: Sequence, answer_cfg,
                  cache_dir: str | Path, skipped_ids: Collection[str] = ()):
    """The response table of ``probes`` from ``model_cfg`` (``scorer()`` loads a white-box model
    only when an answer is not cached; ``model_key`` identifies it in the cache). ``skipped_ids``:
    probes the cell could not make, whose lines an imported file may hold (set aside there)."""
    from medexp.answers.cache import cached_answers
    from medexp.config.schemas import AnswerMode, ModelFamily, check_answer_config

    check_answer_config(answer_cfg)
    family = ModelFamily(model_cfg.family)
    settings = OmegaConf.to_container(answer_cfg, resolve=True, enum_to_str=True) \
        if OmegaConf.is_config(answer_cfg) else dict(vars(answer_cfg))
    settings.pop("min_answered", None)  # what a cell accepts, not how a model answers
    probes = list(probes)
    if family is ModelFamily.responses:
        from medexp.answers.imported import import_model_responses

        return import_model_responses(probes, model_cfg, answer_cfg, skipped_ids, cache_dir)
    if family is ModelFamily.openai_compatible:
        import functools

        from medexp.answers.openai_client import ChatClient

        served = {"base_url": model_cfg.base_url, "model": model_cfg.pretrained or model_cfg.name}
        # One client for the whole probe set (one pre-flight request), made only when a probe is asked.
        client = functools.cache(functools.partial(ChatClient.from_model_config, model_cfg))
        return cached_answers({"model": served, "answer": settings}, probes, cache_dir,
                              lambda chunk: client().answer_probes(chunk, answer_cfg),
                              desc=f"asking {served['model']}")
    from medexp.answers.whitebox import generated_answers, likelihood_answers

    answer = likelihood_answers if AnswerMode(answer_cfg.mode) is AnswerMode.likelihood else generated_answers
    return cached_answers({"model": model_key, "answer": settings}, probes, cache_dir,
                          lambda chunk: answer(scorer(), chunk, answer_cfg), desc=f"answering probes ({model_cfg.name})")
