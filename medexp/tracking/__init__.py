"""MLflow tracking: the only code in medexp that imports mlflow.

One run per cell: run name = cell key, ``medexp.*`` tags, the resolved config as params and as
a YAML artefact, the detector's scalars as metrics (one batch), its table as parquet and its
figures as PNG. The default store is ``sqlite:///<root>/mlruns/mlflow.db`` with artefacts under
``<root>/mlruns/artifacts``.

* :mod:`~medexp.tracking.tracker`: the :class:`Tracker` client and the :class:`TrackedRun` it returns;
* :mod:`~medexp.tracking.store`: where the store is (:func:`tracking_uri`), how to browse it;
* :mod:`~medexp.tracking.tags`: what every run records about its process and environment;
* :mod:`~medexp.tracking.reconcile`: runs left RUNNING by a gone process, and ends a process could
  not record;
* :mod:`~medexp.tracking.retry`: calls that ride out transient errors; a full disk named.
* :mod:`~medexp.tracking.ui`: the experiment's tags that make the MLflow UI show it as a runs table.
"""

import os

# MLflow 3 starts a usage-telemetry thread at import unless told not to (mlflow/telemetry/utils.py:
# is_telemetry_disabled). medexp runs on machines that are often offline, and that thread once
# changed os.environ while a tracking request read it, failing a computed cell. Set before any
# mlflow import in this process; child processes (launcher workers) inherit it.
# MLFLOW_DISABLE_TELEMETRY=false in the environment turns it back on.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from medexp.tracking.reconcile import ReconciledRun  # noqa: E402 - after the switch above
from medexp.tracking.store import TrackingUnavailable, tracking_uri, ui_command
from medexp.tracking.tracker import TrackedRun, Tracker, write_files

__all__ = ["ReconciledRun", "TrackedRun", "Tracker", "TrackingUnavailable", "tracking_uri", "ui_command", "write_files"]
