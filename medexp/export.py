"""``python -m medexp.export <cell overrides> format=<fmt> out=<dir> [model_id=<served id>]``

Writes the probe set an answering cell asks (every arm its detector needs: the original and
shuffled options, the masked and back-translated texts, the blind and masked images, the twins),
with the images each arm uses, in the format a harness runs models with
(:mod:`medexp.answers.formats`: ``openai_batch``, ``vlmevalkit``, ``lmms_eval``, ``jsonl``,
``llava_med``, ``inspect_ai``), plus ``manifest-<format>.json`` (the cell, the probe set's content
hash, the probes per arm, the answer settings, the format's options, every file's SHA-256, the
images among them): one manifest per format, so one folder can hold the same probes for several
harnesses. Rerun over an interrupted export, it writes what is missing (images are renamed into
place whole, and one whose bytes are not its hash is copied again). The harness's output comes back as a cell through
``model=responses model.responses_format=<fmt> model.responses_path=<its output>`` with the same
overrides: the cell rebuilds the same probe set, checks its hash against the manifest's, and
joins every reply to its probe by id.

The probe set does not depend on the model (probes are drawn from a seed of the bench and the
detector), so any ``model=`` gives the same export; ``model_id`` is the model a Batch request
names (default: ``model.pretrained``, else ``model.name``).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

USAGE = """usage: python -m medexp.export detector=<answering detector> format=<fmt> out=<dir> [model_id=<id>]
                               [format_options.<option>=<v> ...]
                               [bench=<name>] [control=<name>] [seed=<n>] [detector.<field>=<v> ...]

Writes the cell's probes (every arm) and their images for a harness, with manifest-<fmt>.json; import the
harness's replies with model=responses model.responses_format=<fmt> model.responses_path=<replies>
and the same overrides.
Formats: openai_batch (OpenAI Batch API / vLLM run_batch input), vlmevalkit (custom dataset TSVs),
lmms_eval (a task folder), jsonl (plain probe lines), llava_med (LLaVA-Med's question file),
inspect_ai (an Inspect task file and its dataset).
Format options: openai_batch: batch_max_requests (50000), batch_max_bytes (200000000) per input
file, reasoning_model (false; true: max_completion_tokens and no temperature, as reasoning models take).
Example: python -m medexp.export detector=option_order format=openai_batch out=/tmp/option_order"""
OPTIONS = ("format", "out", "model_id")
FORMAT_OPTION = "format_options."  # format_options.<name>=<value>: an option of the format (HarnessFormat.options)


def split_arguments(args: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Hydra overrides and the command's options (``format=``, ``out=``, ``model_id=``, and the
    format's ``format_options.<name>=``, typed as the format's default)."""
    from medexp.answers.formats import harness_format
    from medexp.config.command_line import split_named_options

    given_options = [arg for arg in args if arg.startswith(FORMAT_OPTION)]
    overrides, given = split_named_options([arg for arg in args if arg not in given_options], OPTIONS)
    options = {**dict.fromkeys(OPTIONS), **given}
    for name in ("format", "out"):
        if options[name] is None:
            raise ValueError(f"name the {'harness format' if name == 'format' else 'output folder'} with {name}=<...>")
    fmt = harness_format(options["format"])
    options["format"] = fmt.name
    options["format_options"] = format_options(fmt, given_options)
    return overrides, options


def format_options(fmt, given: list[str]) -> dict[str, Any]:
    """The format's options: its defaults, with ``format_options.<name>=<value>`` read as the type of the default."""
    chosen = dict(fmt.options)
    for arg in given:
        name, _, text = arg.removeprefix(FORMAT_OPTION).partition("=")
        if name not in fmt.options:
            raise ValueError(f"format={fmt.name} has no option {name!r}; its options: {sorted(fmt.options) or 'none'}")
        default = fmt.options[name]
        if isinstance(default, bool):
            if text.strip().lower() not in ("true", "false"):
                raise ValueError(f"{arg}: {name} is true or false")
            chosen[name] = text.strip().lower() == "true"
        else:
            try:
                chosen[name] = type(default)(text)
            except ValueError as error:
                raise ValueError(f"{arg}: {name} is a {type(default).__name__} ({error})") from error
    return chosen


def export(cfg, options: dict[str, Any]) -> list[str]:
    """Write the cell's probe set for a harness; the lines to print."""
    from medexp import __version__
    from medexp.answers.cache import probe_set_hash
    from medexp.answers.formats import harness_format
    from medexp.answers.formats.base import IMAGES, Export
    from medexp.answers.formats.manifest import Manifest, manifests_in, read_manifest
    from medexp.config.schemas import AnswerMode
    from medexp.detectors import declaration_for
    from medexp.kernel.cell import Cell
    from medexp.kernel.hashing import file_sha256
    from medexp.kernel.registry import import_object
    from medexp.runner.evaluate import check_cell

    declaration = declaration_for(cfg.detector)
    if declaration.probes is None:
        raise ValueError(f"detector={cfg.detector.name} asks no questions (it reads {sorted(i.value for i in declaration.inputs)}): "
                         "there is nothing to export; the answering detectors are "
                         f"{sorted(d.name for d in _answering())}")
    answer_cfg = cfg.detector.answer
    if AnswerMode(answer_cfg.mode) is not AnswerMode.generate:
        raise ValueError(f"detector.answer.mode={AnswerMode(answer_cfg.mode).value}: a harness generates its replies; "
                         "export (and import) with detector.answer.mode=generate")
    check_cell(cfg)
    fmt = harness_format(options["format"])
    out = Path(options["out"]).expanduser()
    ctx = _context(cfg)
    probe_set = import_object(declaration.probes)(ctx)
    probes = list(probe_set.probes)
    if not probes:
        raise ValueError(f"detector={cfg.detector.name}: no probe could be made (skipped: {probe_set.skip_counts()})")
    digest = probe_set_hash(probes, ctx.cache_dir)
    earlier_files: list[str] = []  # what an earlier export in this format wrote here (its options may have differed)
    for path in manifests_in(out) if out.is_dir() else ():
        if (earlier := read_manifest(path)).probe_set != digest:
            raise ValueError(f"{out} holds the export of another probe set ({earlier.probe_set}, {path.name}); write "
                             "this one to another folder")
        if earlier.format == fmt.name:
            earlier_files = list(earlier.files)
    out.mkdir(parents=True, exist_ok=True)
    cell = Cell.from_config(cfg)
    name = f"medexp_{cfg.bench.name}_{cfg.detector.name}_{digest[:8]}"
    model_id = options["model_id"] or cfg.model.get("pretrained") or str(cfg.model.name)
    written = fmt.write(Export(probes, answer_cfg, out, name, digest, str(model_id), options["format_options"]))
    for stale in set(earlier_files) - {path.relative_to(out).as_posix() for path in written}:
        (out / stale).unlink(missing_ok=True)  # e.g. request shards of other limits: never answered twice
    arms = dict(Counter(probe.kind for probe in probes))
    rebuild = [arg for arg in options["overrides"] if not arg.startswith(("model=", "model."))]
    manifest = Manifest(
        format=fmt.name, probe_set=digest, cell_key=cell.key, bench=str(cfg.bench.name),
        detector=str(cfg.detector.name), control=str(cfg.control.name), seed=int(cfg.seed), n_probes=len(probes),
        arms=arms, n_images=len({probe.image for probe in probes if probe.image is not None}),
        answer=_plain(answer_cfg), files={path.relative_to(out).as_posix(): file_sha256(path) for path in written},
        rebuild=rebuild, skipped=probe_set.skip_counts(), medexp_version=__version__,
        options=dict(options["format_options"]))
    manifest_path = manifest.write(out)
    command = " ".join(["python -m medexp model=responses model.name=<model>", f"model.responses_format={fmt.name}",
                        "model.responses_path=<replies>", *rebuild])
    return [
        f"exported {len(probes)} probes ({', '.join(f'{kind} {count}' for kind, count in arms.items())}) of "
        f"bench={cell.bench},detector={cell.detector},control={cell.control} seed={cfg.seed} (the same for any "
        f"model); probe set {digest}; {manifest.n_images} images"
        + (f"; {len(probe_set.skipped)} probes could not be made ({probe_set.skip_counts()})" if probe_set.skipped else ""),
        f"format {fmt.name}: {fmt.writes}",
        *[f"wrote {path}" for path in [*written, manifest_path] if path.parent.name != IMAGES],
        f"the replies: {fmt.reply_file}; import them with",
        f"  {command}",
    ]


def _answering() -> list:
    from medexp.detectors import declarations

    return [declaration for declaration in declarations() if declaration.probes is not None]


def _context(cfg):
    """The cell's context as its evaluator sees it: the benchmark (and twin) loaded, the control
    applied; the model is never loaded (a score-ordering control reads the cell model's scores)."""
    from medexp.controls import apply_control, control_benchmark
    from medexp.detectors import declaration_for
    from medexp.detectors.declaration import Input
    from medexp.evaluators.context import CellContext
    from medexp.kernel.cell import Cell
    from omegaconf import OmegaConf

    cache_dir = Path(cfg.paths.cache_dir)
    benchmark = control_benchmark(cfg, cache_dir, OmegaConf.get_type(cfg.detector).example_fields)
    twin = None
    if Input.twin in declaration_for(cfg.detector).inputs:
        from medexp.benchmarks.twins import load_twin

        twin = load_twin(cfg.bench, cache_dir)
    ctx = CellContext(cfg, Cell.from_config(cfg).seed(int(cfg.seed)), benchmark, list(benchmark.examples), cache_dir,
                      twin=twin)
    ctx.examples = apply_control(cfg.control, ctx.examples, ctx.example_scores)
    return ctx


def _plain(answer_cfg) -> dict[str, Any]:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(answer_cfg, resolve=True, enum_to_str=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    from medexp.config.command_line import answer_command_line

    def split(args: list[str]) -> tuple[list[str], dict[str, Any]]:
        overrides, options = split_arguments(args)
        return overrides, {**options, "overrides": overrides}

    return answer_command_line("medexp.export", USAGE, argv, split, {"detector": "the answering detector"}, export)


if __name__ == "__main__":
    sys.exit(main())
