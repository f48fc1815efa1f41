"""``python -m medexp.inspect bench=<name> [bench.root=...] [other overrides]``

Loads one benchmark exactly as a cell would and prints a JSON summary on stdout, to check a
local copy before auditing it:

- what was read: name, split, format, the layout the loader found (``vqa_rad_osf`` for the
  official VQA-RAD release, ``hf_parquet`` for a hub copy ...), root, config version and the data
  files read;
- counts: examples, skipped rows by kind (``n_skipped.<reason>``, as a run logs them) with the
  first skipped rows, the rows ``bench.dedup`` removed, the split's own expected count
  (``bench.expected_by_split``, else ``bench.expected_examples``) and whether it matches;
- strata: for every meta field its value counts (or only its number of distinct values when
  there are more than ``MAX_LISTED_VALUES``);
- images: distinct images, questions per image (min, median, max), the missing and corrupt
  images behind the skipped rows, and groups of byte-identical images stored under different
  names (SHA-256, remembered per file version in ``<cache_dir>/digests.sqlite``);
- ROI annotations, when the loader reads any (:mod:`medexp.benchmarks.roi`): how many images
  carry boxes and masks, the box labels, masks whose size differs from their image;
- findings: one sentence per thing a person should look at;
- with ``--join=<file>``: an external per-item table (a published top-K list, ...) matched to
  the benchmark's items through ``bench.external_ids`` (:mod:`medexp.benchmarks.external_ids`):
  how many rows matched, the unmatched ids and the first joined rows (``--join-column=<name>``
  names the id column, default ``example_id``; ``--join-out=<file.csv>`` writes every joined row).

``python -m medexp.inspect model=<name> --prompt [--image=<file>] [--question=...] [--answer=...]``
prints instead what the model's processor makes of one example, without loading its weights
(:mod:`medexp.models.preview`): the adapter's prompt, the tokens the model would receive, how many
stand for the image, the gold answer's tokens. The example is a 512 x 512 gray image with a SLAKE
question unless ``--image``/``--question``/``--answer`` say otherwise, or, with ``bench=<name>``,
the benchmark's first example.

Log lines and errors go to stderr; the exit status is non-zero on any error, including a split
with more skipped rows than ``bench.max_skipped_share`` allows (its summary is still printed,
the reason among its findings).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

MAX_LISTED_VALUES = 30
MAX_LISTED_ITEMS = 20  # missing images, duplicate groups ...: the first ones, in example order
MAX_JOINED_ROWS = 50  # joined rows of an external table shown in the summary (--join-out writes all)
USAGE = """usage: python -m medexp.inspect bench=<name> [bench.root=/path/to/copy] [bench.<field>=<value> ...]
                                [--join=<table> [--join-column=<id column>] [--join-out=<file.csv>]]
       python -m medexp.inspect model=<name> [model.<field>=<value> ...] [bench=<name>] --prompt
                                [--image=<file>] [--question=<text>] [--answer=<text>]

Load a benchmark as `python -m medexp` would and print its counts, strata, image checks and
ROI annotations as JSON; with --join, match an external per-item table (a JSON list of objects,
JSON lines, CSV, TSV or parquet) to its items through bench.external_ids.
With --prompt, print the prompt and token counts the model's processor gives one example (no
weights are loaded): a 512 x 512 image and a SLAKE question, the benchmark's first example with
bench=<name>, or --image/--question/--answer.
Example: python -m medexp.inspect bench=vqa_rad bench.root=/data/VQA_RAD
         python -m medexp.inspect bench=pathvqa bench.root=/data/PathVQA --join=CheXagent__pathvqa.json
         python -m medexp.inspect model=qwen2_5_vl --prompt"""
_OPTIONS = ("--join", "--join-column", "--join-out")
_PROMPT_OPTIONS = ("--image", "--question", "--answer")


def strata(examples) -> dict[str, Any]:
    """Per meta field: value -> count (most common first), or {"n_distinct": k} for many values.

    ROI fields are left out: they describe regions, not strata (see :func:`roi_summary`).
    """
    from medexp.benchmarks.roi import ROI_FIELDS

    counts: dict[str, Counter] = {}
    for example in examples:
        for key, value in example.meta.items():
            if key not in ROI_FIELDS:
                counts.setdefault(key, Counter())[_label(value)] += 1
    return {key: _listed(counter) for key, counter in counts.items()}


def _listed(counter: Counter) -> dict[str, Any]:
    return dict(counter.most_common()) if len(counter) <= MAX_LISTED_VALUES else {"n_distinct": len(counter)}


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def image_summary(benchmark, cache_dir: str | Path) -> dict[str, Any]:
    """Distinct images, questions per image, missing and corrupt images, byte-identical groups."""
    from medexp.benchmarks.images import CORRUPT_IMAGE, MISSING_IMAGE

    per_image = Counter(str(example.image) for example in benchmark.examples if example.image is not None)
    counts = sorted(per_image.values())
    return {
        "n_distinct": len(per_image),
        "questions_per_image": (
            {"min": counts[0], "median": statistics.median(counts), "max": counts[-1]} if counts else None
        ),
        "missing": _image_problems(benchmark.skipped, MISSING_IMAGE),
        "corrupt": _image_problems(benchmark.skipped, CORRUPT_IMAGE),
        "duplicates": duplicate_groups(per_image, cache_dir),
    }


def _image_problems(skipped, kind: str) -> dict[str, Any]:
    """Skipped rows of one kind; rows about the same image share their reason, so reasons count images."""
    reasons = Counter(skip.reason.split(": ", 1)[-1] for skip in skipped if skip.kind == kind)
    return {"n_images": len(reasons), "n_questions": sum(reasons.values()), "images": list(reasons)[:MAX_LISTED_ITEMS]}


def duplicate_groups(per_image: Counter, cache_dir: str | Path) -> dict[str, Any]:
    """Images (paths, in example order) whose bytes are identical, with their question counts."""
    from medexp.benchmarks.digests import DigestCache

    paths = list(per_image)
    by_digest: dict[str, list[str]] = {}
    for path, digest in zip(paths, DigestCache(cache_dir).digests(paths)):
        by_digest.setdefault(digest, []).append(path)
    groups = [
        {"sha256": digest, "images": group, "n_questions": sum(per_image[path] for path in group)}
        for digest, group in by_digest.items()
        if len(group) > 1
    ]
    return {
        "n_groups": len(groups),
        "n_images": sum(len(group["images"]) for group in groups),
        "groups": groups[:MAX_LISTED_ITEMS],
    }


def roi_summary(examples) -> dict[str, Any] | None:
    """What the ROI meta holds, per distinct image; None when the loader reads no ROI fields."""
    from medexp.benchmarks.images import image_size
    from medexp.benchmarks.roi import ROI_BOXES, ROI_FIELDS, ROI_MASK

    if not any(key in example.meta for example in examples for key in ROI_FIELDS):
        return None
    first_meta: dict[Any, dict] = {}
    for example in examples:
        first_meta.setdefault(example.image, example.meta)
    boxes = {image: meta[ROI_BOXES] for image, meta in first_meta.items() if meta.get(ROI_BOXES) is not None}
    masks = {image: meta[ROI_MASK] for image, meta in first_meta.items() if meta.get(ROI_MASK)}
    mismatched = [mask for image, mask in masks.items() if image_size(Path(mask)) != image_size(Path(image))]
    return {
        "n_examples_annotated": sum(example.meta.get(ROI_BOXES) is not None for example in examples),
        "n_images_annotated": len(boxes),
        "n_images_without_annotation": len(first_meta) - len(boxes),
        "n_boxes": sum(len(entries) for entries in boxes.values()),
        "labels": _listed(Counter(entry["label"] for entries in boxes.values() for entry in entries)),
        "n_images_with_mask": len(masks),
        "mask_size_mismatch": {"n_masks": len(mismatched), "masks": mismatched[:MAX_LISTED_ITEMS]},
    }


def findings(summary: dict[str, Any]) -> list[str]:
    """Sentences about what needs a look: the count, skipped rows, duplicates, mask sizes."""
    from medexp.benchmarks.images import CORRUPT_IMAGE, MISSING_IMAGE

    notes = []
    n, expected, split = summary["n_examples"], summary["expected_examples"], summary["split"]
    if expected is None:
        notes.append(f"{n} examples; the config states no expected count for split {split} to compare with")
    elif n == expected:
        notes.append(f"{n} examples, as the config expects for split {split}")
    else:
        notes.append(
            f"{n} examples where the config expects {expected} for split {split} ({n - expected:+d}): "
            f"is the copy complete, and are the layout ({summary['layout']}) and split right?"
        )
    other = {kind: count for kind, count in summary["skipped"].items() if kind not in (MISSING_IMAGE, CORRUPT_IMAGE)}
    if other:
        first = next((row for row in summary["skipped_rows"] if row["reason"].split(":", 1)[0] in other), None)
        example = f", e.g. {first['row']}: {first['reason']}" if first else ""
        notes.append(f"{sum(other.values())} row(s) skipped as unusable "
                     f"({', '.join(f'{kind}: {count}' for kind, count in other.items())}){example}")
    if summary.get("n_deduplicated"):
        notes.append(f"bench.dedup removed {summary['n_deduplicated']} row(s) repeating an earlier (image, question, "
                     f"answer) triple, e.g. {summary['deduplicated'][0]}")
    images = summary["images"]
    for kind in ("missing", "corrupt"):
        problem = images[kind]
        if problem["n_questions"]:
            notes.append(
                f"{problem['n_questions']} question(s) skipped for {problem['n_images']} {kind} image(s), "
                f"e.g. {problem['images'][0]}"
            )
    duplicates = images["duplicates"]
    if duplicates["n_groups"]:
        notes.append(
            f"{duplicates['n_groups']} group(s) of byte-identical images under different names "
            f"({duplicates['n_images']} files): the same picture is counted as distinct images"
        )
    roi = summary.get("roi")
    if roi and roi["mask_size_mismatch"]["n_masks"]:
        notes.append(f"{roi['mask_size_mismatch']['n_masks']} mask(s) differ in size from their image")
    return notes


def summarize(benchmark, bench_cfg, cache_dir: str | Path) -> dict[str, Any]:
    """The JSON-ready summary of a loaded benchmark and the config it came from."""
    from medexp.benchmarks import expected_count
    from medexp.benchmarks.skips import skip_metrics
    from medexp.config.schemas import BenchFormat

    expected = expected_count(bench_cfg)
    summary = {
        "name": benchmark.name,
        "split": bench_cfg.split,
        "format": BenchFormat(bench_cfg.format).value,
        "layout": benchmark.layout,
        "root": bench_cfg.get("root"),
        "version": bench_cfg.get("version"),
        "files": list(benchmark.files),
        "n_examples": len(benchmark),
        "n_with_image": sum(example.image is not None for example in benchmark.examples),
        "n_skipped": len(benchmark.skipped),
        "skipped": dict(Counter(skip.kind for skip in benchmark.skipped).most_common()),
        **{name: int(count) for name, count in skip_metrics(benchmark.skipped).items()},
        "skipped_rows": [{"row": skip.label, "reason": skip.reason} for skip in benchmark.skipped[:MAX_LISTED_ITEMS]],
        "n_deduplicated": len(benchmark.removed_duplicates),
        "deduplicated": [item.reason for item in benchmark.removed_duplicates[:MAX_LISTED_ITEMS]],
        "expected_examples": expected,
        "matches_expected": None if expected is None else len(benchmark) == expected,
        "strata": strata(benchmark.examples),
        "images": image_summary(benchmark, cache_dir),
    }
    roi = roi_summary(benchmark.examples)
    if roi is not None:
        summary["roi"] = roi
    summary["findings"] = findings(summary)
    return summary


def external_join(benchmark, bench_cfg, path: str, id_column: str, out: str | None) -> dict[str, Any]:
    """The ``--join`` section: an external per-item table matched to the benchmark's items."""
    from medexp.benchmarks.external_ids import IdScheme, join_table, read_table

    scheme = IdScheme.from_config(bench_cfg)
    examples = {example.example_id: example for example in benchmark.examples}
    joined = join_table(read_table(path), scheme, examples, id_column, path)
    frame = joined.frame
    frame.insert(1, "position", [examples[i].position if i in examples else None for i in frame["example_id"]])
    if out:
        from medexp.kernel.atomic import atomic_path

        with atomic_path(Path(out)) as tmp:
            frame.to_csv(tmp, index=False)
    rows = json.loads(frame[frame["example_id"].notna()].head(MAX_JOINED_ROWS).to_json(orient="records"))
    return {
        "file": str(path),
        "id_column": id_column,
        "scheme": {"prefix": scheme.prefix, "padding": scheme.padding, "aliases": list(scheme.aliases)},
        "n_rows": len(frame),
        "n_matched": joined.n_matched,
        "n_unmatched": len(joined.unmatched),
        "unmatched": joined.unmatched[:MAX_LISTED_ITEMS],
        "rows": rows,
        **({"written": str(out)} if out else {}),
    }


def _split_options(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """Hydra overrides and the ``--join*`` options (``--name=value``)."""
    from medexp.config.command_line import split_named_options

    return split_named_options(args, _OPTIONS)


def _split_prompt_options(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """Hydra overrides and the ``--prompt`` command's options (``--name=value``)."""
    overrides, options = [], {}
    for arg in args:
        name, _, value = arg.partition("=")
        if name == "--prompt":
            continue
        if name in _PROMPT_OPTIONS:
            if not value:
                raise ValueError(f"{name} needs a value: {name}=<...>")
            options[name] = value
        elif name.startswith("--"):
            raise ValueError(f"{name} is not an option of --prompt (options: {', '.join(_PROMPT_OPTIONS)})")
        else:
            overrides.append(arg)
    return overrides, options


def prompt_example(cfg, overrides: list[str], options: dict[str, str], workdir: Path):
    """The example --prompt shows: the benchmark's first when ``bench=`` was named, else the
    default one (a square gray image written under ``workdir``, a SLAKE question), with
    ``--image``, ``--question`` and ``--answer`` replacing its parts."""
    from dataclasses import replace

    if any(arg.startswith("bench=") for arg in overrides):
        from medexp.benchmarks import load_benchmark_from_config

        example = load_benchmark_from_config(cfg.bench, cfg.paths.cache_dir).examples[0]
    else:
        from medexp.models.preview import default_example

        example = default_example(workdir)
    changes = {"image": Path(options["--image"]) if "--image" in options else None,
               "question": options.get("--question"), "answer": options.get("--answer")}
    return replace(example, **{key: value for key, value in changes.items() if value is not None})


def prompt_main(args: list[str]) -> int:
    """``--prompt``: the model's prompt and token counts for one example, as JSON on stdout."""
    import tempfile

    from medexp.config.command_line import compose_checked, read_command_line

    parsed = read_command_line("medexp.inspect", USAGE, args, _split_prompt_options, {"model": "the model"})
    if isinstance(parsed, int):
        return parsed
    overrides, options = parsed

    def preview() -> tuple[dict[str, Any], int]:
        from medexp.models import model_location
        from medexp.models.preview import prompt_preview

        cfg = compose_checked(overrides)
        with tempfile.TemporaryDirectory() as workdir:
            example = prompt_example(cfg, overrides, options, Path(workdir))
            return prompt_preview(cfg.model, model_location(cfg.model, cfg.paths.cache_dir), example), 0

    return _print_summary(preview)


def _print_summary(work: Callable[[], tuple[dict[str, Any], int]]) -> int:
    """Run ``work`` (the summary and the exit status) and print the summary as JSON; a value out
    of range is a usage error (status 2), any other failure one readable line and status 1."""
    from medexp.config.ranges import ConfigRangeError

    try:
        summary, status = work()
    except ConfigRangeError as error:  # a value out of range is a usage error
        print(f"medexp.inspect: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # any failure becomes one readable line and a non-zero status
        print(f"medexp.inspect: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2))
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    from medexp.config.command_line import compose_checked, read_command_line

    args = list(sys.argv[1:] if argv is None else argv)
    if "--prompt" in args:
        return prompt_main(args)
    parsed = read_command_line("medexp.inspect", USAGE, argv, _split_options, {"bench": "the benchmark"})
    if isinstance(parsed, int):
        return parsed
    overrides, options = parsed

    def describe() -> tuple[dict[str, Any], int]:
        from medexp.benchmarks import TooManySkipped, load_benchmark_from_config

        status = 0
        cfg = compose_checked(overrides)
        try:
            benchmark, refused = load_benchmark_from_config(cfg.bench, cfg.paths.cache_dir), None
        except TooManySkipped as error:  # still described, so the copy's problems can be seen
            benchmark, refused = error.benchmark, error
        summary = summarize(benchmark, cfg.bench, cfg.paths.cache_dir)
        if refused is not None:
            summary["findings"].insert(0, f"refused: {refused}")
            print(f"medexp.inspect: error: TooManySkipped: {refused}", file=sys.stderr)
            status = 1
        if "--join" in options:
            summary["external_join"] = external_join(benchmark, cfg.bench, options["--join"],
                                                     options.get("--join-column", "example_id"),
                                                     options.get("--join-out"))
        return summary, status

    return _print_summary(describe)


if __name__ == "__main__":
    sys.exit(main())
