# medexp on CUDA machines: GPU torch from PyPI (CUDA wheels) and faiss-gpu.
# CI does not build this image (no Docker engine there); build it on a GPU host:
#   docker build -t medexp . && docker run --gpus all -v $PWD/mlruns:/app/mlruns medexp
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04

ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-pip git \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY medexp ./medexp
COPY hydra_plugins ./hydra_plugins
COPY conf ./conf
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --upgrade pip \
 && /opt/venv/bin/pip install torch \
 && /opt/venv/bin/pip install -e ".[gpu]"
ENV PATH=/opt/venv/bin:$PATH MEDEXP_ROOT=/app
COPY tests ./tests

# The default cell runs the offline demo; pass overrides as arguments, e.g. model=qwen2_5_vl bench=slake.
ENTRYPOINT ["python", "-m", "medexp"]
