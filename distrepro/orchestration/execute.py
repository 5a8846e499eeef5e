"""How ``distrepro run`` trains one config: in this process, or through an executor.

The command line only parses its flags into :class:`RunOptions`; which path a campaign takes is decided here,
beside the executors that decide it (:func:`~distrepro.orchestration.executors.selection.make_executor`: ``--jobs
1``, or a local pool with room for one cell only, trains in this process, as a campaign always has).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from distrepro.orchestration.executors.selection import ExecutorSpec, make_executor
from distrepro.orchestration.resume import check_campaign
from distrepro.tracking.mlflow_client import resolve_tracking_uri

if TYPE_CHECKING:
    from distrepro.config.run_config import RunConfig
    from distrepro.orchestration.campaign import CampaignResult


@dataclass(frozen=True)
class RunOptions:
    """How a campaign runs, as the ``run`` command's flags say: the config's file (errors and hints name it), the
    executor (``--executor``, ``--jobs``, ``--ray-*``, ``--slurm-*``), the campaign run to continue (``--resume``),
    the progress display (``None``: bars on a terminal; ``False``: a heartbeat line) and ``--system-metrics``."""

    source: str | Path | None = None
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)
    resume: str | None = None
    show_progress: bool | None = None
    system_metrics: bool = False


def execute(cfg: RunConfig, options: RunOptions, tracking_uri: str | None = None) -> CampaignResult:
    """Train ``cfg`` (every seed) as ``options`` say and log it; the campaign's result, failed cells counted.

    ``--resume`` is checked against the config first (:func:`~distrepro.orchestration.resume.check_campaign`:
    a differing config is refused, a FINISHED campaign raises ``NothingToResume``), before the campaign's modules
    import MLflow and pandas."""
    uri = tracking_uri or resolve_tracking_uri()
    if options.resume:
        check_campaign(cfg, uri, options.resume)
    from distrepro.orchestration.campaign import run_campaign
    from distrepro.orchestration.executors.dispatch import CampaignRequest, run_campaigns

    executor = make_executor(options.executor, [cfg])
    if executor is None:  # --jobs 1: the cells train in this process
        return run_campaign(
            cfg,
            source=options.source,
            show_progress=options.show_progress,
            tracking_uri=uri,
            resume=options.resume,
            system_metrics=options.system_metrics,
        )
    request = CampaignRequest(cfg, options.source, options.resume, system_metrics=options.system_metrics)
    return run_campaigns([request], executor, options.show_progress, tracking_uri=uri)[0]
