"""Secrets never enter a config: where a setting names an environment variable (``api_key_env``),
a value that looks like the key itself is refused, and the message never repeats it.

A variable name is ``[A-Za-z_][A-Za-z0-9_]*`` (OPENAI_API_KEY). A value that is not one, that
starts the way API keys and tokens start (``sk-``, ``hf_``, ``ghp_``, ``AKIA``, a JWT's
``eyJ`` ...), or holds a long mixed run of letters and digits between underscores (a random
token shaped like a name: ``AbC9x2...``) is taken for a secret.
"""

from __future__ import annotations

import re

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ENV_NAME_KEYS = ("api_key_env",)  # config keys whose value names an environment variable
_TOKEN_PREFIXES = ("sk-", "sk_", "pk_", "rk_", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
                   "glpat-", "xoxa-", "xoxb-", "xoxp-", "AKIA", "ASIA", "AIza", "eyJ", "Bearer")
_LONG_RUN = 16  # a run of letters and digits this long, mixing both, is a random token, not a word


def looks_like_secret(value: str) -> bool:
    """Whether ``value``, given where a variable *name* belongs, looks like a key or token."""
    if not ENV_NAME.fullmatch(value) or value.startswith(_TOKEN_PREFIXES):
        return True
    for run in value.split("_"):
        if len(run) >= _LONG_RUN and re.search(r"\d", run) and re.search(r"[A-Za-z]", run):
            return True
    return False


def env_name_problem(value, key: str) -> str | None:
    """Why ``value`` cannot be the environment-variable name ``key`` asks for (never showing it), or None."""
    if value is None:
        return None
    if not isinstance(value, str) or looks_like_secret(value):
        return (f"{key} must name the environment variable that holds the key (e.g. OPENAI_API_KEY), not hold a "
                "key: its value looks like a secret and is not shown; export the key in a variable and give its name")
    return None


def override_problems(overrides) -> list[str]:
    """The problems of command-line overrides (``key=value`` strings, a sweep's ``key=a,b``) that
    set an environment-variable name to something that looks like a secret."""
    problems = []
    for override in overrides:
        key, separator, value = str(override).partition("=")
        name = key.lstrip("+~").rsplit("@", 1)[0].rsplit(".", 1)[-1]
        if not separator or name not in ENV_NAME_KEYS:
            continue
        for item in _sweep_values(value):
            problem = env_name_problem(item, key.lstrip("+~"))
            if problem:
                problems.append(problem)
                break
    return problems


def _sweep_values(value: str) -> list[str]:
    """The values of an override: one, a comma-separated sweep, or a sweep function's arguments."""
    text = value.strip()
    inner = re.fullmatch(r"\w+\((.*)\)", text, flags=re.DOTALL)
    if inner:
        text = inner.group(1)
    items = [item.strip().strip("'\"") for item in text.split(",")]
    return [item for item in items if item and item != "null"]
