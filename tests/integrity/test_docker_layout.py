"""The Docker image holds everything the package needs: its COPY lines, replayed into a temporary
directory, give a tree in which the default config composes (hydra_plugins included)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

_COMPOSE = r"""
import sys
# Forget the editable install of this checkout: only the copied tree may be importable.
sys.meta_path[:] = [finder for finder in sys.meta_path if "editable" not in repr(finder).lower()]
sys.path_hooks[:] = [hook for hook in sys.path_hooks if "editable" not in repr(hook).lower()]
sys.path[:] = [sys.argv[1]] + [entry for entry in sys.path if "__editable__" not in entry and entry not in ("", ".")]
sys.path_importer_cache.clear()
import medexp
assert medexp.__file__.startswith(sys.argv[1]), medexp.__file__
from medexp.config import compose
cfg = compose([])
import hydra_plugins.medexp_grid_sweeper.medexp_grid_sweeper as sweeper  # what the defaults list overrides to
assert sweeper.__file__.startswith(sys.argv[1]), sweeper.__file__
print(cfg.model.name, cfg.detector.name, cfg.bench.name)
"""


def copied_paths(dockerfile: Path) -> list[str]:
    """The sources of the Dockerfile's COPY instructions (build-context paths)."""
    sources = []
    for line in dockerfile.read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "COPY":
            sources.extend(part for part in parts[1:-1] if not part.startswith("--"))
    return sources


def test_the_image_layout_composes_the_default_config(tmp_path):
    sources = copied_paths(REPO / "Dockerfile")
    assert {"medexp", "hydra_plugins", "conf", "pyproject.toml"} <= set(sources)
    app = tmp_path / "app"
    app.mkdir()
    for source in sources:
        origin = REPO / source
        if origin.is_dir():
            shutil.copytree(origin, app / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, app / source)
    env = {**os.environ, "MEDEXP_ROOT": str(app)}
    result = subprocess.run([sys.executable, "-c", _COMPOSE, str(app)], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["demo_leaky", "exch", "demo"]


def test_a_missing_copy_line_would_be_caught(tmp_path):
    """The check above fails on the old image layout (no hydra_plugins): it is not vacuous."""
    app = tmp_path / "app"
    app.mkdir()
    for source in ("medexp", "conf"):
        shutil.copytree(REPO / source, app / source, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "MEDEXP_ROOT": str(app)}
    result = subprocess.run([sys.executable, "-c", _COMPOSE, str(app)], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode != 0


def _run_lines(dockerfile: Path) -> list[str]:
    """The shell commands of the Dockerfile's RUN instructions, continuation lines joined."""
    text = dockerfile.read_text().replace("\\\n", " ")
    return [line.split(None, 1)[1] for line in text.splitlines() if line.split()[:1] == ["RUN"]]


def test_the_image_installs_the_lock_with_its_hashes_on_the_locks_python():
    """The image installs what the README installs: requirements.lock, hashes required, then the
    package without dependencies, on the Python version the lock was compiled for."""
    dockerfile = REPO / "Dockerfile"
    assert "requirements.lock" in copied_paths(dockerfile)
    commands = " && ".join(_run_lines(dockerfile))
    installs = [step.strip() for step in commands.split("&&") if " install " in f" {step} " and "pip" in step]
    assert any("--require-hashes" in step and "-r requirements.lock" in step for step in installs), installs
    package = [step for step in installs if step.endswith(" -e .") or " -e . " in step]
    assert package and all("--no-deps" in step for step in package), installs
    assert all("-r requirements.lock" in step or "--no-deps" in step for step in installs), (
        f"a pip install outside the lock: {installs}")
    lock_python = re.search(r"--python-version (\d+\.\d+)", (REPO / "scripts" / "lock.sh").read_text()).group(1)
    base = next(line.split()[1] for line in dockerfile.read_text().splitlines() if line.startswith("FROM "))
    assert re.match(rf"python:{re.escape(lock_python)}\b", base), (base, lock_python)
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==\S+ \\\n((?:\s+--hash=sha256:\w+(?: \\)?\n)*)",
                      (REPO / "requirements.lock").read_text(), flags=re.M)
    assert pins and all(hashes.strip() for _, hashes in pins), [name for name, hashes in pins if not hashes.strip()]
