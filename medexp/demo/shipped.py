"""The demo models shipped with medexp: trained once, verified on every install.

Pinned CPU kernels (:mod:`medexp.kernel.portable`) make a demo build bit-identical across instruction
sets of one CPU vendor, not across vendors: the same pinned build gives other weights on an AMD
EPYC than on an Intel Xeon (docs/portability.md has the evidence). So the models the README's and
docs' figures rest on are not trained on the user's machine: their built directories ship inside
the package (``medexp/demo/shipped/<cache entry>/``), listed with every file's SHA-256 in
``SHA256SUMS.json``. :func:`medexp.demo.models.demo_model_dir` (and
:func:`~medexp.demo.models.demo_reference_dir` for the membership cell's reference models) installs
a listed entry into the cache by copying it, each file checked against its digest, instead of
training it; any other settings still train locally. ``python -m medexp.demo.rebuild`` rebuilds the
shipped models on this CPU and compares them.
"""

from __future__ import annotations

import json
import logging
import platform
import shutil
from pathlib import Path

from medexp.kernel.hashing import directory_sha256, file_sha256

log = logging.getLogger(__name__)

SHIPPED_ROOT = Path(__file__).with_name("shipped")
DIGESTS_FILE = SHIPPED_ROOT / "SHA256SUMS.json"
WEIGHTS_FILE = "model.safetensors"
# The configs whose models ship: the quick-start pair, the rest of the demo cohort that the demo
# grid's and the suite's cells read, the answering probes' pair and the newer probes' pair
# (docs/probes.md) that their documented commands read (conf/model/<name>.yaml).
SHIPPED_MODELS = ("demo_clean", "demo_leaky", "demo_clean_b", "demo_clean_c", "demo_leaky_b",
                  "demo_clean_mc", "demo_leaky_mc", "demo_clean_probes", "demo_leaky_probes")
# The reference models that ship: per leaky config, how many of detector=membership_references'
# trained references (conf/detector/membership_references.yaml), over the splits its demo cell
# audits (the test split's members, the heldout split's non-members; conf/train/train.yaml's
# reference_splits). The README's and docs' membership figures read them: shipped, they are the
# same weights on every machine, as the candidate is.
SHIPPED_REFERENCES = {"demo_leaky": 8}
REFERENCE_SPLITS = ("test", "heldout")


def reference_name(model: str, index: int) -> str:
    """The name medexp.train and the membership cell give reference ``index`` of ``model``."""
    return f"{model}_reference{index}"


# Every shipped name, as SHA256SUMS.json lists it: the models, then the references.
SHIPPED_NAMES = SHIPPED_MODELS + tuple(
    reference_name(model, index) for model, count in SHIPPED_REFERENCES.items() for index in range(count))


def shipped_reference(name: str) -> tuple[str, int] | None:
    """(its candidate's config, its index) when ``name`` is a shipped reference model's, else None."""
    for model, count in SHIPPED_REFERENCES.items():
        for index in range(count):
            if name == reference_name(model, index):
                return model, index
    return None


class ShippedModelMismatch(RuntimeError):
    """A shipped file, or the demo benchmark it was trained on, is not what the package lists."""


def bench_sha256(bench_root: Path) -> str:
    """The demo benchmark's content (every split file and image) as one digest; its manifest,
    which only summarises them, is left out."""
    return directory_sha256(bench_root, exclude=("manifest.json",))


def shipped_digests() -> dict:
    """``SHA256SUMS.json``: per cache entry, its model name, the demo benchmark's digest, each file's,
    and the CPU, torch and kernel settings it was trained with (entries may come from different CPUs)."""
    if not DIGESTS_FILE.is_file():
        return {"models": {}}
    return json.loads(DIGESTS_FILE.read_text(encoding="utf-8"))


def shipped_entry(entry: str) -> dict | None:
    """The listing of cache entry ``entry`` (``model-<hash>`` or ``reference-<hash>``) when it ships, else None."""
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
             listing["model"], listing["trained_on"]["cpu"], listing["files"][WEIGHTS_FILE][:16])
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
