"""Where the tracking store is, how to browse it, and whether a tracking server answers."""

from __future__ import annotations

import os
from pathlib import Path


def tracking_uri(tracking_cfg, root: str | Path) -> str:
    """Config value, else $MLFLOW_TRACKING_URI, else the sqlite store under <root>/mlruns."""
    if tracking_cfg.uri:
        return str(tracking_cfg.uri)
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(root).resolve() / 'mlruns' / 'mlflow.db'}"


def ui_command(uri: str) -> str:
    """How to look at the runs of ``uri``: a tracking server serves its own UI; a store needs ``mlflow ui``."""
    if uri.startswith(("http://", "https://")):
        return f"open {uri} in a browser (the tracking server's UI)"
    return f"mlflow ui --backend-store-uri {uri} --host 127.0.0.1"


class TrackingUnavailable(RuntimeError):
    """The tracking store cannot be reached (the message says what to do)."""


def check_server(uri: str, timeout: float) -> None:
    """Fail fast, naming the URI, when a tracking server does not answer; and keep MLflow's own
    HTTP retries short (its defaults retry for minutes) unless the user set them."""
    import requests

    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(int(max(timeout, 1) * 3)))
    try:
        requests.get(f"{uri.rstrip('/')}/health", timeout=timeout)
    except requests.RequestException as error:
        raise TrackingUnavailable(
            f"the tracking server {uri} is unreachable ({type(error).__name__}); start it "
            f"(mlflow server --backend-store-uri sqlite:///mlruns/mlflow.db --host 127.0.0.1) or point medexp "
            f"elsewhere with tracking.uri=... (tracking.uri=null for the local store)"
        ) from None
