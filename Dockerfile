# medexp from requirements.lock, exactly as the README installs it: the same pins and hashes on
# CPython 3.11 (the lock's Python), so the image computes the figures the README shows.
# torch is PyPI's build, which carries its CUDA libraries and runs on a GPU when the container
# sees one (docker run --gpus all, with the NVIDIA container toolkit) and on the CPU otherwise.
# CI does not build this image (no Docker engine there); build it where Docker runs:
#   docker build -t medexp . && docker run --gpus all -v $PWD/mlruns:/app/mlruns medexp
FROM python:3.11-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends git \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.lock ./
# --require-hashes: every package must match its pinned hash (pip implies it for a hashed file;
# saying it makes a lock without hashes fail here instead of installing unchecked).
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY medexp ./medexp
COPY hydra_plugins ./hydra_plugins
COPY conf ./conf
RUN /opt/venv/bin/pip install --no-deps -e .
ENV PATH=/opt/venv/bin:$PATH MEDEXP_ROOT=/app
COPY tests ./tests

# The default cell runs the offline demo; pass overrides as arguments, e.g. model=qwen2_5_vl bench=slake.
ENTRYPOINT ["python", "-m", "medexp"]
