"""How the MLflow UI shows medexp's experiment: as model runs, not GenAI traces, in a runs table
whose columns are what a reader compares across cells (their axes and verdict).

MLflow 3 records an experiment's kind in the tag ``mlflow.experimentKind``
(``custom_model_development`` for model runs, ``genai_development`` for GenAI apps). MLflow 3.17's
UI picks the page from a "GenAI / Model training" switch in its sidebar instead, kept in the
browser (GenAI until the user flips it, hence the traces overview, "Traces 0, no data") and
overridden by the URL parameter ``workflowType``; its code reads the tag only where the switch is
disabled. So the kind is tagged, and :func:`runs_table_url` names ``workflowType`` too.

The columns come from a view: the UI keeps a shared view as the experiment tag
``mlflow.sharedViewState.<key>`` (the table's state as JSON) and opens it from the URL parameter
``viewStateShareKey=<key>``; there is no experiment setting for default columns. medexp writes
its own view under the key ``medexp``.
"""

from __future__ import annotations

import json

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_RUNS_KIND = "custom_model_development"  # "Machine learning"/"Model training" in the UI
VIEW_KEY = "medexp"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"

# What a reader compares across cells: the grid's axes (tags every cell run carries) and the verdict
# (metrics). The UI names a column "<tags|params|metrics>.`<name>`".
COMPARED_TAGS = ("medexp.model", "medexp.bench", "medexp.detector", "medexp.control")
COMPARED_METRICS = ("p_value", "flag")
# Grouping lists a sweep's cells flat under their detector instead of collapsed under the sweep's
# parent run (the parent, which has no detector, goes to the UI's "Additional runs"). A group's own
# row shows each column's minimum: the smallest p-value among the detector's cells.
GROUP_BY_TAG = "medexp.detector"


def runs_table_view() -> dict:
    """The table state medexp's view holds, in the UI's format: columns and grouping."""
    columns = [f"tags.`{tag}`" for tag in COMPARED_TAGS] + [f"metrics.`{metric}`" for metric in COMPARED_METRICS]
    return {
        "selectedColumns": columns,
        "groupBy": {"aggregateFunction": "min", "groupByKeys": [{"mode": "tag", "groupByData": GROUP_BY_TAG}]},
    }


def missing_experiment_tags(current: dict[str, str]) -> dict[str, str]:
    """The tags an experiment carrying ``current`` needs for the UI: the kind where none is set (a
    kind chosen in the UI stays), medexp's view wherever it differs (medexp owns that key, so a
    newer medexp's view replaces an older one)."""
    tags = {}
    if EXPERIMENT_KIND_TAG not in current:
        tags[EXPERIMENT_KIND_TAG] = MODEL_RUNS_KIND
    view = json.dumps(runs_table_view(), sort_keys=True)
    if current.get(VIEW_TAG) != view:
        tags[VIEW_TAG] = view
    return tags


def runs_table_url(ui_address: str, experiment_id: str) -> str:
    """The address of the experiment's runs table in medexp's view, on the UI at ``ui_address``
    (a tracking server's URL, or ``mlflow ui``'s, http://127.0.0.1:5000 by default)."""
    return (f"{ui_address.rstrip('/')}/#/experiments/{experiment_id}/runs"
            f"?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}")
