"""CI installs requirements.lock and then medexp with --no-deps: a dependency added to pyproject.toml
but not to the lock is missing in CI only. Every runtime dependency, and every one of the extras
the lock is compiled with (scripts/lock.sh), must be pinned there."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO

LOCKED_EXTRAS = ("test", "joblib", "slurm")


def _locked_names() -> set[str]:
    text = (REPO / "requirements.lock").read_text()
    return {canonicalize_name(name) for name in re.findall(r"^([A-Za-z0-9_.\-]+)==", text, flags=re.MULTILINE)}


def _declared_names() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in LOCKED_EXTRAS:
        declared += project["optional-dependencies"][extra]
    return {canonicalize_name(Requirement(spec).name) for spec in declared}


def test_every_declared_dependency_is_pinned_in_the_lock():
    missing = sorted(_declared_names() - _locked_names())
    assert not missing, f"not in requirements.lock (run scripts/lock.sh): {missing}"


def test_the_lock_lists_the_extras_it_is_compiled_with():
    script = (REPO / "scripts" / "lock.sh").read_text()
    assert all(f"--extra {extra}" in script for extra in LOCKED_EXTRAS)
