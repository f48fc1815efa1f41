#!/usr/bin/env bash
# Refreshes requirements.lock: every dependency of medexp with the test, joblib, slurm and inspect extras,
# pinned with hashes, for Linux x86-64 and CPython 3.11. Needs uv (pip install uv) and PyPI.
# torch and torchvision come from PyPI's default index, whose Linux wheel runs on the CPU as well
# as on CUDA GPUs; a CPU-only torch index has no torchvision to match, which open_clip needs.
# lock-constraints.txt caps them at the newest releases the project's machines install (torch
# 2.14.1, torchvision 0.29.1), so that the lock installs there. The demo models train differently
# under another torch: after raising the caps, rerun the demo and update the figures of the README and docs/ (docs/demo.md holds the demo's tables).
# By default the pins already in the lock are kept (a new dependency is added beside them);
# `scripts/lock.sh --upgrade` moves every pin to the newest release the constraints allow.
set -euo pipefail
cd "$(dirname "$0")/.."
uv pip compile pyproject.toml --extra test --extra joblib --extra slurm --extra inspect \
  --python-platform x86_64-unknown-linux-gnu --python-version 3.11 --generate-hashes \
  --constraint scripts/lock-constraints.txt --custom-compile-command scripts/lock.sh \
  "$@" -o requirements.lock
