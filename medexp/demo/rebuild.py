"""Rebuild the shipped demo models on this CPU and compare them with the shipped files.

``python -m medexp.demo.rebuild`` trains the shipped models' settings from an empty cache in the
pinned-kernel process every demo build uses (the shipped reference models from the shipped clean
base their candidate was leaked from), and prints, per model, whether the rebuilt weights are the
shipped bytes (naming both SHA-256 and both CPUs); it exits 1 when any differs.
``--update`` replaces the named models' shipped files and listings in ``SHA256SUMS.json`` with the
rebuild (the others are kept), for a maintainer who changes the demo recipe or ships another model
(:mod:`medexp.demo.shipped`).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path

from medexp.kernel.atomic import atomic_write_bytes
from medexp.kernel.hashing import file_sha256
from medexp.config import compose
from medexp.demo.cache import demo_benchmark_root
from medexp.demo.models import MANIFEST, demo_model_dir, demo_reference_dir, read_build_report
from medexp.demo.shipped import (
    DIGESTS_FILE, REFERENCE_SPLITS, SHIPPED_NAMES, SHIPPED_ROOT, WEIGHTS_FILE, bench_sha256, cpu_description,
    shipped_digests, shipped_entry, shipped_reference,
)


def _demo_settings(name: str):
    """The demo settings of a shipped name: its config's, or a reference's candidate's."""
    reference = shipped_reference(name)
    return compose([f"model={reference[0] if reference else name}"]).model.demo


def _rebuild(names, cache_dir: Path) -> dict[str, Path]:
    """Train the named models' shipped settings into ``cache_dir`` (never installing a shipped copy),
    in the pinned-kernel process every demo build uses: a model from scratch; a reference model from
    its candidate's clean base as every install has it (the shipped one), in a cache of its own
    (``references/``), so that installing that base replaces none of the models rebuilt here."""
    built = {}
    for name in names:
        reference = shipped_reference(name)
        if reference is None:
            built[name] = demo_model_dir(_demo_settings(name), cache_dir, use_shipped=False)
        else:
            built[name] = demo_reference_dir(_demo_settings(name), reference[1], REFERENCE_SPLITS,
                                             cache_dir / "references", use_shipped=False)
    return built


def _listing(name: str, directory: Path, bench_root: Path) -> dict:
    """What ``SHA256SUMS.json`` lists for one model built here: its files' digests, the demo
    benchmark's, the CPU, torch and kernel settings of this build and, for a leak (a leaky model
    or a reference model), the weights' digest of the clean base it started from: a candidate and
    its references share one."""
    import torch

    record = read_build_report(directory)
    files = sorted(p.name for p in directory.iterdir() if p.is_file() and p.name != MANIFEST)
    trained_on = {**cpu_description(), "torch": torch.__version__, "kernels": record["kernels"]}
    listing = {"model": name, "bench_sha256": bench_sha256(bench_root),
               "files": {file: file_sha256(directory / file) for file in files}, "trained_on": trained_on}
    if "base" in record:  # the base's cache entry, beside this build's in the same cache
        listing["base_weights_sha256"] = file_sha256(directory.parent / record["base"] / WEIGHTS_FILE)
    return listing


def _update(built: dict[str, Path]) -> None:
    """Replace the shipped files of the models in ``built`` with their rebuild and rewrite
    ``SHA256SUMS.json``; the other shipped models keep their files and listings (and the CPU they
    were trained on), so one model can be added or rebuilt without retraining the rest."""
    listings = {entry: listing for entry, listing in shipped_digests()["models"].items()
                if listing["model"] in SHIPPED_NAMES and listing["model"] not in built}
    for name, directory in built.items():
        shutil.rmtree(SHIPPED_ROOT / directory.name, ignore_errors=True)
        # copied as new files: a build writes its weights readable by their owner only
        shutil.copytree(directory, SHIPPED_ROOT / directory.name, copy_function=shutil.copyfile)
        bench_root = demo_benchmark_root(_demo_settings(name).bench, directory.parent.parent)
        listings[directory.name] = _listing(name, directory, bench_root)
    for stale in SHIPPED_ROOT.iterdir():
        if stale.is_dir() and stale.name not in listings:
            shutil.rmtree(stale)
    atomic_write_bytes(DIGESTS_FILE, (json.dumps({"models": listings}, indent=1, sort_keys=True) + "\n").encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m medexp.demo.rebuild",
        description="Rebuild the shipped demo models on this CPU (pinned kernels, from an empty cache) and compare "
                    "their weights with the shipped ones; exit 1 naming the digests when they differ.")
    parser.add_argument("models", nargs="*", default=list(SHIPPED_NAMES),
                        help="model configs or reference names, e.g. demo_leaky_reference0 (default: all shipped)")
    parser.add_argument("--update", action="store_true",
                        help="replace the named models' shipped files with this rebuild (a maintainer changing the demo "
                             "recipe or shipping another model)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="where to build (default: a temporary directory, removed afterwards)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.models) - set(SHIPPED_NAMES))
    if unknown:
        parser.error(f"not shipped: {', '.join(unknown)}; shipped: {', '.join(SHIPPED_NAMES)}")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory(prefix="medexp-rebuild-") as scratch:
        cache_dir = args.cache_dir or Path(scratch)
        built = _rebuild(args.models, cache_dir)
        if args.update:
            _update(built)
            print(f"shipped models replaced from this rebuild: {DIGESTS_FILE}")
            return 0
        cpu = cpu_description()
        print(f"rebuilt on {cpu['cpu']} ({', '.join(cpu['isa']) or 'no AVX2'})")
        differ = 0
        for name, directory in built.items():
            listing = shipped_entry(directory.name)
            rebuilt = file_sha256(directory / WEIGHTS_FILE)
            if listing is None:
                print(f"{name}: {directory.name} is not shipped (its settings changed?); rebuilt sha256 {rebuilt}")
                differ += 1
                continue
            shipped = listing["files"][WEIGHTS_FILE]
            same = rebuilt == shipped
            differ += not same
            print(f"{name}: {'matches' if same else 'DIFFERS'}  rebuilt {rebuilt}  shipped {shipped} "
                  f"(trained on {listing['trained_on']['cpu']})")
        if differ:
            print(f"{differ} rebuilt model(s) differ from the shipped weights on this CPU: the figures in the README "
                  "and docs use the shipped weights, which every install copies (docs/portability.md)")
        return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
