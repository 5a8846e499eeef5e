"""What the MLflow UI shows of distrepro's runs: the experiment marked as model training, the shared runs-table
view (its metric and tag columns), and the addresses every command prints.

Apart from :mod:`distrepro.tracking.mlflow_client` (the store itself) because these are the UI's conventions,
restated from MLflow 3.17's UI, and change with it.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def view_state(tags: Sequence[str] = ()) -> str:
    """The shared runs-table view (JSON): :data:`VIEW_METRICS` and ``tags`` (e.g. ``verdict.<claim>``) as columns."""
    import json

    columns = [*(f"metrics.`{m}`" for m in VIEW_METRICS), *(f"tags.`{t}`" for t in tags)]
    return json.dumps({"selectedColumns": columns, "runsHiddenMode": "SHOW_ALL", "hideEmptyCharts": True})


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
