"""MLflow tracking: the only code in medexp that imports mlflow.

One run per cell: run name = cell key, ``medexp.*`` tags, the resolved config as params and as
a YAML artefact, the detector's scalars as metrics (one batch), its table as parquet and its
figures as PNG. The default store is ``sqlite:///<root>/mlruns/mlflow.db`` with artefacts under
``<root>/mlruns/artifacts``.

* :mod:`~medexp.tracking.tracker`: the :class:`Tracker` client and the :class:`TrackedRun` it returns;
* :mod:`~medexp.tracking.store`: where the store is (:func:`tracking_uri`), how to browse it;
* :mod:`~medexp.tracking.tags`: what every run records about its process and environment;
* :mod:`~medexp.tracking.reconcile`: runs left RUNNING by a gone process.
* :mod:`~medexp.tracking.ui`: the experiment's tags that make the MLflow UI show it as a runs table.
"""

from medexp.tracking.reconcile import ReconciledRun
from medexp.tracking.store import TrackingUnavailable, tracking_uri, ui_command
from medexp.tracking.tracker import TrackedRun, Tracker

__all__ = ["ReconciledRun", "TrackedRun", "Tracker", "TrackingUnavailable", "tracking_uri", "ui_command"]
