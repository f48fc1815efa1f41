"""The command lines of medexp's plain entry points (``medexp.inspect``, ``medexp.power``,
``medexp.plan``): Hydra overrides mixed with the command's own ``name=value`` options, the usage on
``--help``, and the exit statuses they share (0 for help, 2 for a usage error, 1 for a failure)."""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable, Sequence

SplitOptions = Callable[[list[str]], tuple[list[str], dict[str, Any]]]


def read_command_line(prog: str, usage: str, argv: Sequence[str] | None, split: SplitOptions,
                      required: dict[str, str]) -> tuple[list[str], dict[str, Any]] | int:
    """``(overrides, options)`` of the command line (``argv``, default ``sys.argv[1:]``), or the
    exit status after printing the usage (help) or a usage error. ``split`` separates the
    command's own options (raising ValueError on a bad one); ``required`` names the config groups
    an override must choose, with what they are (``{"bench": "the benchmark"}``). Logging to
    stderr is set up once the command line is read."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or any(arg in ("-h", "--help") for arg in args):
        print(usage)
        return 0 if args else 2
    try:
        overrides, options = split(args)
    except ValueError as error:
        print(f"{prog}: error: {error}\n{usage}", file=sys.stderr)
        return 2
    if not all(any(arg.startswith(f"{group}=") for arg in overrides) for group in required):
        named = " and ".join(required.values())
        choices = " ".join(f"{group}=<name>" for group in required)
        print(f"{prog}: error: name {named} with {choices}\n{usage}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    return overrides, options


def answer_command_line(prog: str, usage: str, argv: Sequence[str] | None, split: SplitOptions,
                        required: dict[str, str], answer: Callable[[Any, dict[str, Any]], list[str]]) -> int:
    """Run a command that answers with lines: read its command line (:func:`read_command_line`),
    compose the config and check its values, print ``answer(cfg, options)``; returns the exit
    status. A value out of range (:class:`~medexp.config.ranges.ConfigRangeError`, from the config
    or from ``answer``) is status 2; any other failure becomes one readable line on stderr and status 1."""
    parsed = read_command_line(prog, usage, argv, split, required)
    if isinstance(parsed, int):
        return parsed
    overrides, options = parsed
    from medexp.config.ranges import ConfigRangeError

    try:
        lines = answer(compose_checked(overrides), options)
    except ConfigRangeError as error:  # a usage error, as on the other commands
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # a failure of the command is a line and a status, never a traceback
        print(f"{prog}: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def compose_checked(overrides: list[str]):
    """The composed config with every value in its range (:class:`~medexp.config.ranges.ConfigRangeError`
    otherwise), before any work: a benchmark loaded, another process's build waited on."""
    from medexp.config import compose
    from medexp.config.ranges import validate

    cfg = compose(overrides)
    validate(cfg)
    return cfg


def split_named_options(args: list[str], names: tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
    """Hydra overrides and the command's own ``<name>=<value>`` options among ``names`` (a
    ValueError for one without a value)."""
    overrides, options = [], {}
    for arg in args:
        name, _, value = arg.partition("=")
        if name in names:
            if not value:
                raise ValueError(f"{name} needs a value: {name}=<...>")
            options[name] = value
        else:
            overrides.append(arg)
    return overrides, options
