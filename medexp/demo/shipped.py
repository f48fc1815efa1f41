"""The demo models shipped with medexp: trained once, verified on every install.

Pinned CPU kernels (:mod:`medexp.portable`) make a demo build bit-identical across instruction
sets of one CPU vendor, not across vendors: the same pinned build gives other weights on an AMD
EPYC than on an Intel Xeon (docs/portability.md has the evidence). So the models the README's and
docs' figures rest on are not trained on the user's machine: their built directories ship inside
the package (``medexp/demo/shipped/<cache entry>/``), listed with every file's SHA-256 in
``SHA256SUMS.json``. :func:`medexp.demo.models.demo_model_dir` installs a listed entry into the
cache by copying it, each file checked against its digest, instead of training it; any other
settings still train locally. ``python -m medexp.demo.shipped`` rebuilds the shipped models on this
CPU and says, naming the digests, whether the rebuild matches; ``--update`` replaces the shipped
files with the rebuild (for a maintainer changing the recipe).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import platform
import shutil
import sys
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

SHIPPED_ROOT = Path(__file__).with_name("shipped")
DIGESTS_FILE = SHIPPED_ROOT / "SHA256SUMS.json"
WEIGHTS_FILE = "model.safetensors"
# The configs whose models ship: the quick-start pair and the rest of the demo cohort that the
# demo grid's and the suite's cells read (conf/model/<name>.yaml).
SHIPPED_MODELS = ("demo_clean", "demo_leaky", "demo_clean_b", "demo_clean_c", "demo_leaky_b")


class ShippedModelMismatch(RuntimeError):
    """A shipped file, or the demo benchmark it was trained on, is not what the package lists."""


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def directory_sha256(root: Path, exclude: tuple[str, ...] = ()) -> str:
    """One digest over every file under ``root`` (relative path and content), in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file() and p.name not in exclude):
        digest.update(f"{path.relative_to(root).as_posix()}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def bench_sha256(bench_root: Path) -> str:
    """The demo benchmark's content (every split file and image) as one digest; its manifest,
    which only summarises them, is left out."""
    return directory_sha256(bench_root, exclude=("manifest.json",))


def shipped_digests() -> dict:
    """``SHA256SUMS.json``: per cache entry, its model name, the demo benchmark's digest and each file's."""
    if not DIGESTS_FILE.is_file():
        return {"models": {}}
    return json.loads(DIGESTS_FILE.read_text(encoding="utf-8"))


def shipped_entry(entry: str) -> dict | None:
    """The listing of cache entry ``entry`` (``model-<hash>``) when it ships, else None."""
    return shipped_digests()["models"].get(entry)


def matches_shipped(directory: Path, listing: dict) -> bool:
    """Whether ``directory``'s weights are the shipped ones (a cache entry trained here may not be)."""
    weights = Path(directory) / WEIGHTS_FILE
    return weights.is_file() and file_sha256(weights) == listing["files"][WEIGHTS_FILE]


def install_shipped(entry: str, listing: dict, bench_root: Path, staging: Path, manifest: str) -> dict:
    """Copy shipped entry ``entry`` into ``staging``, each file checked against its listed digest,
    and return its build record (written last by the caller as ``manifest``).

    Refuses, naming both digests, a shipped file that is not the listed one (a damaged install) and
    a demo benchmark that is not the one the model was trained on (generated otherwise here).
    """
    local_bench = bench_sha256(bench_root)
    if local_bench != listing["bench_sha256"]:
        raise ShippedModelMismatch(
            f"the demo benchmark generated here ({bench_root}, sha256 {local_bench[:16]}...) is not the one the "
            f"shipped model {listing['model']} was trained on (sha256 {listing['bench_sha256'][:16]}...); "
            "the generator must be byte-identical on every CPU (docs/portability.md): please report this machine")
    source = SHIPPED_ROOT / entry
    for name, expected in sorted(listing["files"].items()):
        actual = file_sha256(source / name) if (source / name).is_file() else "missing"
        if actual != expected:
            raise ShippedModelMismatch(
                f"shipped file {source / name} has sha256 {actual}, the package lists {expected}: the installed "
                "medexp is damaged; reinstall it")
        shutil.copyfile(source / name, staging / name)
    record = json.loads((source / manifest).read_text(encoding="utf-8"))
    log.info("demo model %s installed from the package (trained on %s; sha256 %s... verified)",
             listing["model"], shipped_digests()["trained_on"]["cpu"], listing["files"][WEIGHTS_FILE][:16])
    return {**record, "shipped": {"entry": entry, "weights_sha256": listing["files"][WEIGHTS_FILE]}}


def cpu_description() -> dict:
    """The CPU this process runs on, as a figure's provenance names it: its name, vendor, family and
    model numbers (a virtual machine often reports only "AMD EPYC"), and the instruction sets that
    choose kernels."""
    fields = {}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").split("\n\n", 1)[0].splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    isa = [name for name in ("avx2", "avx512f", "amx_bf16") if name in fields.get("flags", "").split()]
    return {"cpu": fields.get("model name", platform.processor() or "unknown"), "vendor": fields.get("vendor_id"),
            "family": fields.get("cpu family"), "model": fields.get("model"), "isa": isa}


def _rebuild(names, cache_dir: Path) -> dict[str, Path]:
    """Train the named models' shipped settings from scratch into ``cache_dir`` (never installing a
    shipped copy), in the pinned-kernel process every demo build uses."""
    from medexp.config import compose
    from medexp.demo.models import demo_model_dir

    return {name: demo_model_dir(compose([f"model={name}"]).model.demo, cache_dir, use_shipped=False)
            for name in names}


def _listing(name: str, directory: Path, bench_root: Path, manifest: str) -> dict:
    files = sorted(p.name for p in directory.iterdir() if p.is_file() and p.name != manifest)
    return {"model": name, "bench_sha256": bench_sha256(bench_root),
            "files": {file: file_sha256(directory / file) for file in files}}


def _update(built: dict[str, Path], manifest: str) -> None:
    """Replace the shipped files with ``built`` and rewrite ``SHA256SUMS.json``."""
    from medexp.atomic import atomic_write_bytes
    from medexp.demo.models import read_build_report
    from medexp.demo.cache import demo_benchmark_root
    from medexp.config import compose
    import torch

    listings = {}
    for name, directory in built.items():
        shutil.rmtree(SHIPPED_ROOT / directory.name, ignore_errors=True)
        shutil.copytree(directory, SHIPPED_ROOT / directory.name)
        bench_root = demo_benchmark_root(compose([f"model={name}"]).model.demo.bench, directory.parent.parent)
        listings[directory.name] = _listing(name, directory, bench_root, manifest)
    for stale in SHIPPED_ROOT.glob("model-*"):
        if stale.name not in listings:
            shutil.rmtree(stale)
    builder = read_build_report(next(iter(built.values())))
    digests = {"trained_on": {**cpu_description(), "torch": torch.__version__, "kernels": builder["kernels"]},
               "models": listings}
    atomic_write_bytes(DIGESTS_FILE, (json.dumps(digests, indent=1, sort_keys=True) + "\n").encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m medexp.demo.shipped",
        description="Rebuild the shipped demo models on this CPU (pinned kernels, from an empty cache) and compare "
                    "their weights with the shipped ones; exit 1 naming the digests when they differ.")
    parser.add_argument("models", nargs="*", default=list(SHIPPED_MODELS), help="model configs (default: all shipped)")
    parser.add_argument("--update", action="store_true",
                        help="replace the shipped files with this rebuild (a maintainer changing the demo recipe)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="where to build (default: a temporary directory, removed afterwards)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.models) - set(SHIPPED_MODELS))
    if unknown:
        parser.error(f"not shipped: {', '.join(unknown)}; shipped: {', '.join(SHIPPED_MODELS)}")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from medexp.demo.models import _MANIFEST

    with tempfile.TemporaryDirectory(prefix="medexp-rebuild-") as scratch:
        cache_dir = args.cache_dir or Path(scratch)
        built = _rebuild(args.models, cache_dir)
        if args.update:
            _update(built, _MANIFEST)
            print(f"shipped models replaced from this rebuild: {DIGESTS_FILE}")
            return 0
        cpu = cpu_description()
        print(f"rebuilt on {cpu['cpu']} ({', '.join(cpu['isa']) or 'no AVX2'}); shipped models trained on "
              f"{shipped_digests()['trained_on']['cpu']}")
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
            print(f"{name}: {'matches' if same else 'DIFFERS'}  rebuilt {rebuilt}  shipped {shipped}")
        if differ:
            print(f"{differ} rebuilt model(s) differ from the shipped weights on this CPU: the figures in the README "
                  "and docs use the shipped weights, which every install copies (docs/portability.md)")
        return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
