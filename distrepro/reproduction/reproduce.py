"""``distrepro reproduce <paper>``: run every arm a paper's claims need, then write the report.

Four steps, one module each: choose the arms and load their configs (:mod:`.selection`), train them
(:mod:`.training`), then build the products and the report (:mod:`.reporting`). All arms train in the experiment
``distrepro/<paper>`` under one *umbrella* run, ``reproduce <paper> (<scale>)``, which holds the report.

Scales: ``proxy`` (default) uses each arm's ``config``; ``paper`` uses the sibling file with
``.paper.yaml`` in place of ``.yaml`` (e.g. the real dataset and the paper's epochs), which must
exist; ``mid`` the sibling ``.mid.yaml``: a CPU-sized run (<= 30 min per paper on 2 cores) that
reaches the regime the paper's accuracy and convergence claims need (the claims' ``regime:``
conditions check that it does); ``gpu`` the sibling ``.gpu.yaml``: the same claims on a recipe sized for one
80 GB GPU in <= 1 hour per paper (``device: cuda``; CIFAR-10 and ResNet-18 from a local folder), priced by
``distrepro plan`` and documented in each method's README.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrepro.claims.papers import UnknownPaperError, find_paper, known_papers
from distrepro.claims.schema import Scale
from distrepro.errors import ConfigError
from distrepro.orchestration.campaign import CampaignResult
from distrepro.orchestration.executors.interface import Executor
from distrepro.orchestration.executors.selection import ExecutorSpec
from distrepro.report.results_inputs import INPUTS_TAG, inputs_digest
from distrepro.reproduction.reporting import report_reproduction
from distrepro.reproduction.selection import arm_configs, choose_arms
from distrepro.reproduction.training import check_devices, say_estimate, train_arms


@dataclass
class Reproduction:
    paper: str
    campaigns: dict[str, CampaignResult]
    report: Any | None
    run_id: str = ""  # the umbrella run: the arms' campaign runs name it, the report is its artifacts
    experiment_id: str = ""


def reproduce(
    paper: str,
    scale: Scale = "proxy",
    seeds: str | None = None,
    overrides: list[str] | None = None,
    arms: list[str] | None = None,
    with_arms: list[str] | None = None,
    report: bool = True,
    show_progress: bool | None = None,
    root: Path | None = None,
    sensitivity: bool = False,
    sensitivity_samples: int | None = None,
    system_metrics: bool = False,
    executor: ExecutorSpec | Executor | None = None,
) -> Reproduction:
    """Run the arms of ``paper`` and build its report; see the module docstring.

    Each arm's campaign run names the umbrella in the tag ``distrepro.reproduction`` and stays a top-level row of
    the runs table (its seeds are its children), so the arms' metric columns show without expanding anything. The
    umbrella is a top-level row too, first in the experiment's shared view (:func:`_sort_first`); it ends FINISHED,
    FAILED or KILLED as the reproduction does."""
    from distrepro.plugins.roots import repo_root
    from distrepro.tracking.mlflow_client import DESCRIPTION_TAG, Campaign, experiment_name, resolve_tracking_uri
    from distrepro.tracking.storeprobe import check_store

    info = find_paper(paper, root)
    if not info.method_dirs:
        raise UnknownPaperError(paper, known_papers(root))
    if info.spec is None or not info.spec.setup.arms:
        where = info.path or (root or repo_root()) / "methods"
        raise ConfigError(where, "setup.arms", f"paper '{paper}' declares no arms to reproduce")
    chosen = choose_arms(info, scale, arms, with_arms, root)
    configs = arm_configs(info, chosen, scale, seeds, overrides, root)
    check_devices(configs, executor)
    uri = resolve_tracking_uri()
    check_store(uri)
    say_estimate(paper, configs, uri)
    if seeds is not None:  # below a claim's min_seeds: said now, not after the training
        from distrepro.report.next_steps import seed_warnings

        fewest = min(len(arm.config.seeds) for arm in configs)
        for line in seed_warnings(info, chosen, scale, fewest, root):
            print(line, file=sys.stderr, flush=True)
    umbrella = Campaign(
        experiment_name(paper),
        f"reproduce {paper} ({scale})",
        {
            "distrepro.paper": paper,
            "distrepro.reproduce": scale,
            "distrepro.arms": ",".join(chosen),
            INPUTS_TAG: inputs_digest(info, root),  # RESULTS.md tells runs on other paper.yaml/configs apart
        },
        tracking_uri=uri,
    )
    built = None
    with umbrella:
        assert umbrella.run_id is not None
        umbrella.set_tags({DESCRIPTION_TAG: _umbrella_note(paper, chosen)})
        _sort_first(umbrella)
        campaigns = train_arms(configs, executor, uri, umbrella.run_id, show_progress, system_metrics)
        if report:  # products go to the report's folder and are part of it: train only means no products either
            built = report_reproduction(
                paper,
                info.method_dirs,
                campaigns,
                scale,
                uri,
                root,
                sensitivity,
                sensitivity_samples,
                show_progress,
            )
    return Reproduction(paper, campaigns, built, umbrella.run_id, umbrella.experiment_id or "")


def _sort_first(umbrella: Any) -> None:
    """Log the metric the shared view sorts on (:data:`~distrepro.tracking.ui_view.REPRODUCTION_SORT_METRIC`, the
    start in Unix seconds) now, so that the run is the table's first row while its arms train, and make sure the
    experiment's view sorts on it."""
    import time

    from mlflow.entities import Metric

    from distrepro.tracking.ui_view import REPRODUCTION_SORT_METRIC, refresh_view

    now = time.time()
    metric = Metric(REPRODUCTION_SORT_METRIC, round(now), int(now * 1000), 0)
    umbrella.client.log_batch(umbrella.run_id, metrics=[metric])
    refresh_view(umbrella.client, umbrella.experiment_id or "")


def _umbrella_note(paper: str, arms: list[str]) -> str:
    return (
        f"`distrepro reproduce {paper}`: one top-level run per arm beside this one "
        f"({', '.join(f'`{a}`' for a in arms)}, tagged `distrepro.reproduction` = this run's id), each with one "
        "child run per seed named `<arm>/s<seed>`. The report (`report/report.html`) is logged here once; each "
        "arm's run carries its claims' verdicts as tags "
        "`verdict.<claim>`."
    )
