"""What the MLflow UI shows of distrepro's runs: the experiment marked as model training, the shared runs-table
view (its metric and tag columns), and the addresses every command prints.

Apart from :mod:`distrepro.tracking.mlflow_client` (the store itself) because these are the UI's conventions,
restated from MLflow 3.17's UI, and change with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# MLflow 3's UI opens an experiment on its GenAI pages (traces, sessions) unless the experiment is
# marked as model training. Key and value are those the MLflow UI reads (its ExperimentKind enum in
# mlflow/server/js; MLflow's own demo data sets the same key for GenAI experiments).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING_KIND = "custom_model_development"


#: the runs-table view distrepro's links open: MLflow reads a shared view from the experiment tag
#: ``mlflow.sharedViewState.<key>`` when the page's address carries ``viewStateShareKey=<key>`` (the UI's own
#: "share view" mechanism, MLflow 3.17). Without it the runs table shows no metric column at all.
VIEW_KEY = "distrepro"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
#: the metric columns of that view: each arm's mean over seeds and its interval (tracking/aggregates.py), time to target
#: (short names that stay apart when a header truncates: orchestration/arm_summary.py's SHORT)
VIEW_METRICS = (
    "acc_mean",
    "acc_lo95",
    "acc_hi95",
    "emu_s_mean",
    "emu_s_lo95",
    "emu_s_hi95",
    "time_to_target_s",
    "seeds_finished",
    "headline_pass",
    "headline_fail",
    "headline_inconclusive",
)


#: a metric only ``reproduce`` runs log, at their start: Unix seconds. The shared view sorts on it, newest first, and
#: MLflow puts runs without it after, in its own order (start time, newest first). So the ``reproduce`` runs, which
#: hold the report and the headline tally, are the table's first rows: by start time alone a ``reproduce`` run, which
#: opens before its arms and seeds, sorted below all of them, past the first page. MLflow cannot move a run's start
#: time once it exists, and a shared view cannot pin runs (MLflow 3.17 drops ``runsPinned`` from a shared view).
REPRODUCTION_SORT_METRIC = "reproduction_start_s"


def view_state(tags: Sequence[str] = ()) -> str:
    """The shared runs-table view (JSON): :data:`VIEW_METRICS` and ``tags`` (e.g. ``verdict.<claim>``) as columns,
    sorted by :data:`REPRODUCTION_SORT_METRIC` (the ``reproduce`` runs first, then MLflow's default order)."""
    import json

    columns = [*(f"metrics.`{m}`" for m in VIEW_METRICS), *(f"tags.`{t}`" for t in tags)]
    return json.dumps(
        {
            "selectedColumns": columns,
            "runsHiddenMode": "SHOW_ALL",
            "hideEmptyCharts": True,
            "orderByKey": f"metrics.`{REPRODUCTION_SORT_METRIC}`",
            "orderByAsc": False,
        }
    )


def view_tags(state: str | None) -> list[str]:
    """The tag columns of a view written by :func:`view_state` (none for another view)."""
    import json

    try:
        parsed = json.loads(state or "{}")
    except ValueError:
        return []
    columns = parsed.get("selectedColumns", []) if isinstance(parsed, dict) else []
    return [c[len("tags.`") : -1] for c in columns if isinstance(c, str) and c.startswith("tags.`") and c.endswith("`")]


def refresh_view(client: Any, experiment_id: str) -> None:
    """Rewrite the experiment's shared view as :func:`view_state` writes it now, keeping its tag columns (a view
    written by an older distrepro lacks the sort)."""
    tags = view_tags(client.get_experiment(experiment_id).tags.get(VIEW_TAG))
    client.set_experiment_tag(experiment_id, VIEW_TAG, view_state(tags))


def ui_url(experiment_id: str, base: str = "http://127.0.0.1:5000") -> str:
    """The MLflow UI page with the runs table of an experiment, in distrepro's view (:data:`VIEW_TAG`).

    ``workflowType=machine_learning`` selects the UI's "Model training" view: MLflow 3.17 chooses
    the view from that query parameter (else from the browser's last choice, GenAI by default)
    before it looks at the experiment's kind tag.
    """
    query = f"viewStateShareKey={VIEW_KEY}&workflowType=machine_learning"
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{query}"


def run_url(experiment_id: str, run_id: str, base: str = "http://127.0.0.1:5000") -> str:
    """The MLflow UI page of one run, in the "Model training" view (see :func:`ui_url`)."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?workflowType=machine_learning"
