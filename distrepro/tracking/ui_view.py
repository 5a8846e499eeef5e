"""What the MLflow UI shows of distrepro's runs: the experiment marked as model training, the shared runs-table
views (the confirmatory runs, the exploratory ones), and the addresses every command prints.

Apart from :mod:`distrepro.tracking.mlflow_client` (the store itself) because these are the UI's conventions, not
MLflow's API: restated here from the UI of MLflow 3.17.2 (the version installed by the lock; its sources under
``mlflow/server/js/src/experiment-tracking/components/experiment-page``), and they change with it.

* **A shared view.** The runs page reads a view from the experiment tag ``mlflow.sharedViewState.<key>`` when
  its address carries ``viewStateShareKey=<key>`` (``useSharedExperimentViewState``): a JSON object whose search
  facets (``searchFilter``, ``orderByKey``, ``orderByAsc``, ...) and table state (``selectedColumns``,
  ``columnOrder``, ``columnWidths``, ``runsHiddenMode``, ``hideEmptyCharts``, ...) replace the browser's own. Five
  fields are never taken from a shared view: ``runsExpanded``, ``runsPinned``, ``runsHidden``,
  ``runsVisibilityMap``, ``autoRefreshEnabled``. So a view can choose, order and size the columns, sort and filter,
  but cannot pin a run or open an arm.
* **Nested runs.** A run with the tag ``mlflow.parentRunId`` is drawn under its parent (which expands to it) only
  while the table is unsorted and unfiltered, or sorted by start time (``orderByKey`` ``attributes.start_time``,
  with or without a filter); sorted by anything else, every run is a flat row. So both views sort by start time,
  newest first: each arm (a campaign run) is a row and its seeds are under it; the ``reproduce`` run, which starts
  before its arms, is the row after them.
* **Columns.** A column is named by its id: ``metrics.`<key>```, ``tags.`<key>```, ``attributes.`Run Name```,
  ``runDateAndNestInfo`` (Created) and ``duration`` (Duration). The checkbox, Run Name and Created columns are
  pinned left and Duration is always shown (it can only be moved); ``selectedColumns`` chooses the metric and tag
  columns, which otherwise follow in that order as "Metrics" then "Tags". ``columnOrder`` reorders columns by id
  and ``columnWidths`` sizes them in pixels, a width being applied only to a column that ``columnOrder`` lists. The UI
  never shrinks columns to fit: what passes the right edge needs scrolling, so :data:`VIEW_COLUMNS` are sized for a
  1,400 px window (:data:`VIEW_WIDTH_PX`, see there).
* **The search filter** goes to the store as written; MLflow's SQL store reads ``tags.`<key>` IS NULL`` as "runs
  without that tag", which keeps the confirmatory view on runs from before the exploratory tag existed.
* **The Assistant panel.** On a server reached as ``localhost``, ``127.0.0.1`` or ``::1`` the UI opens its
  Assistant panel, a quarter of the window, the first time a browser visits one (browser storage
  ``mlflow.assistant.fab.autoOpenedOnFirstLoad``); once closed it stays closed (``mlflow.assistant.panelOpen``).
  No view state reaches it, so :data:`VIEW_COLUMNS` fit beside MLflow's left sidebar with that panel closed.
* **The workflow.** ``workflowType=machine_learning`` in the address, or the experiment tag
  :data:`EXPERIMENT_KIND_TAG`, selects the "Model training" pages instead of MLflow 3's GenAI ones.
"""

from __future__ import annotations

import json
from typing import Any

# MLflow 3's UI opens an experiment on its GenAI pages (traces, sessions) unless the experiment is
# marked as model training. Key and value are those the MLflow UI reads (its ExperimentKind enum in
# mlflow/server/js; MLflow's own demo data sets the same key for GenAI experiments).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING_KIND = "custom_model_development"

#: the tag of every run of an exploratory reproduction (on seeds outside its scale's pre-registration record): its
#: umbrella run, its arms' campaign runs and their seed runs. The confirmatory view leaves them out, the exploratory
#: view shows only them
EXPLORATORY_TAG = "distrepro.exploratory"
#: the tag with the verdicts of the headline claims an arm takes part in, by verdict (``PASS A-C1 A-C2 · FAIL
#: A-C3``; every headline claim on the ``reproduce`` run), written with the report (distrepro.report.publish)
HEADLINE_TAG = "distrepro.headline"

#: the view distrepro's links open (the confirmatory runs), and the one of the exploratory runs
VIEW_KEY = "distrepro"
EXPLORATORY_VIEW_KEY = "distrepro-exploratory"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
EXPLORATORY_VIEW_TAG = f"mlflow.sharedViewState.{EXPLORATORY_VIEW_KEY}"

#: the columns a 1,400 px window shows without scrolling, in order, with their widths (px): the run, then per arm
#: its mean emulated time and accuracy over seeds with the bounds of their 95 % interval (short names that stay
#: apart when a header is cut: distrepro.orchestration.arm_summary's SHORT), then its headline verdicts, wide enough
#: for cadp's widest (``FAIL A-C4 · DEPENDS A-C1 A-C3 · INCONCLUSIVE A-C2``, 338 px of text and 22 of padding).
#: Created is narrowed from MLflow's 150 px to what "1 hour ago" needs; Duration is moved past them
VIEW_COLUMNS: tuple[tuple[str, int], ...] = (
    ("attributes.`Run Name`", 150),
    ("runDateAndNestInfo", 104),
    ("metrics.`emu_s_mean`", 75),
    ("metrics.`emu_s_lo95`", 75),
    ("metrics.`emu_s_hi95`", 75),
    ("metrics.`acc_mean`", 72),
    ("metrics.`acc_lo95`", 72),
    ("metrics.`acc_hi95`", 72),
    (f"tags.`{HEADLINE_TAG}`", 361),
)
#: the width those columns take with MLflow's checkbox column (73 px). Beside MLflow's left sidebar the table is
#: 1,145 px wide at a 1,400 px window: this leaves room for a vertical scrollbar (at a 1,366 px screen the table is
#: 1,111 px wide and the headline cell's end is cut; its tooltip shows it whole)
VIEW_WIDTH_PX = 73 + sum(width for _, width in VIEW_COLUMNS)
#: after them, past the right edge: Duration (always shown by MLflow; ``columnOrder`` can only move it), seeds
#: finished, time to target, the ``reproduce`` run's headline tally and every claim of the arm with its verdict
#: (distrepro.report.publish)
MORE_COLUMNS = (
    "duration",
    "metrics.`seeds_finished`",
    "metrics.`time_to_target_s`",
    "metrics.`headline_pass`",
    "metrics.`headline_fail`",
    "metrics.`headline_inconclusive`",
    "tags.`distrepro.verdicts`",
)
#: the runs of each view, as MLflow's search reads them
CONFIRMATORY_FILTER = f"tags.`{EXPLORATORY_TAG}` IS NULL"
EXPLORATORY_FILTER = f"tags.`{EXPLORATORY_TAG}` = 'true'"


def view_state(exploratory: bool = False) -> str:
    """A shared runs-table view (JSON): :data:`VIEW_COLUMNS` first, then :data:`MORE_COLUMNS`; newest first by
    start time, so that seeds stay under their arm; the confirmatory runs, or with ``exploratory`` the others."""
    selectable = [c for c, _ in VIEW_COLUMNS if c.startswith(("metrics.", "tags."))]
    return json.dumps(
        {
            "searchFilter": EXPLORATORY_FILTER if exploratory else CONFIRMATORY_FILTER,
            "orderByKey": "attributes.start_time",
            "orderByAsc": False,
            "selectedColumns": [*selectable, *(c for c in MORE_COLUMNS if c.startswith(("metrics.", "tags.")))],
            "columnOrder": [*(c for c, _ in VIEW_COLUMNS), *MORE_COLUMNS],
            "columnWidths": dict(VIEW_COLUMNS),
            "runsHiddenMode": "SHOW_ALL",
            "hideEmptyCharts": True,
        }
    )


def view_tags() -> dict[str, str]:
    """The experiment tags that hold both views, as :func:`view_state` writes them now."""
    return {VIEW_TAG: view_state(), EXPLORATORY_VIEW_TAG: view_state(exploratory=True)}


def ensure_views(client: Any, experiment_id: str, tags: dict[str, str] | None = None) -> None:
    """Write both views on the experiment where they differ from :func:`view_tags` (missing, or written by another
    distrepro); ``tags``: the experiment's tags when the caller has them (no read then)."""
    if tags is None:
        tags = client.get_experiment(experiment_id).tags
    for key, value in view_tags().items():
        if tags.get(key) != value:
            client.set_experiment_tag(experiment_id, key, value)


def ui_url(experiment_id: str, base: str = "http://127.0.0.1:5000", exploratory: bool = False) -> str:
    """The MLflow UI page with the runs table of an experiment, in distrepro's view of its confirmatory runs (or
    with ``exploratory`` of its exploratory ones).

    ``workflowType=machine_learning`` selects the UI's "Model training" view: MLflow 3.17 chooses
    the view from that query parameter (else from the browser's last choice, GenAI by default)
    before it looks at the experiment's kind tag.
    """
    key = EXPLORATORY_VIEW_KEY if exploratory else VIEW_KEY
    query = f"viewStateShareKey={key}&workflowType=machine_learning"
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{query}"


def run_url(experiment_id: str, run_id: str, base: str = "http://127.0.0.1:5000") -> str:
    """The MLflow UI page of one run, in the "Model training" view (see :func:`ui_url`)."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?workflowType=machine_learning"
