"""Where the tracking store is, how to browse it, and whether a tracking server answers."""

from __future__ import annotations

import os
from pathlib import Path

from medexp.tracking.ui import runs_table_url


def tracking_uri(tracking_cfg, root: str | Path) -> str:
    """Config value, else $MLFLOW_TRACKING_URI, else the sqlite store under <root>/mlruns."""
    if tracking_cfg.uri:
        return str(tracking_cfg.uri)
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(root).resolve() / 'mlruns' / 'mlflow.db'}"


# Where `mlflow ui` serves by default (the command printed below does not change its port).
LOCAL_UI = "http://127.0.0.1:5000"


def ui_command(tracking_cfg, root: str | Path) -> str:
    """How to look at the runs: a tracking server serves its own UI, a store needs ``mlflow ui``;
    and, once the experiment exists, the address of its runs table in medexp's view (without it
    MLflow's UI opens on its GenAI traces overview, see :mod:`medexp.tracking.ui`)."""
    uri = tracking_uri(tracking_cfg, root)
    experiment_id = _experiment_id(uri, tracking_cfg.experiment)
    if uri.startswith(("http://", "https://")):
        where = runs_table_url(uri, experiment_id) if experiment_id else uri
        return f"open {where} in a browser (the tracking server's UI)"
    command = f"mlflow ui --backend-store-uri {uri} --host 127.0.0.1"
    return f"{command}, then open {runs_table_url(LOCAL_UI, experiment_id)}" if experiment_id else command


def _experiment_id(uri: str, name: str) -> str | None:
    """The id of experiment ``name`` in the store at ``uri``; None when it does not exist or the
    store does not answer (the line then names the UI alone)."""
    from mlflow.tracking import MlflowClient

    try:
        experiment = MlflowClient(uri).get_experiment_by_name(name)
    except Exception:  # noqa: BLE001 - a line of advice must never fail the command that prints it
        return None
    return experiment.experiment_id if experiment is not None else None


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
