"""``distrepro reproduce PAPER --resume [RUN_ID]``: continue a reproduction that stopped (Ctrl-C, a crash, a
failed cell) where it stopped.

A reproduction is an umbrella run, ``reproduce <paper> (<scale>)``, and one campaign run per arm tagged with the
umbrella's id (:mod:`distrepro.reproduction.reproduce`). Resuming it means: the umbrella is RUNNING again; an
arm whose campaign FINISHED is skipped; an arm whose campaign did not finish is continued as ``distrepro run
--resume`` continues a campaign (its finished seeds skipped, :mod:`distrepro.orchestration.resume`); an arm that
never started starts now, under the same umbrella; then the report is built as before.

It continues the reproduction *as it started*: the arms, ``--seeds`` and ``--set`` overrides it was started with
are read from the umbrella's tags, so a resume cannot mix two configurations under one run (a campaign's own
check would refuse an arm whose config differs anyway). Without a run id, the newest reproduction of the paper
at ``--scale`` (default proxy) in the store is continued.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distrepro.config.overrides import Override, parse_overrides
from distrepro.config.run_config import parse_seeds
from distrepro.errors import DistreproError

#: umbrella tags that record how a reproduction was started, read back by a resume
SCALE_TAG = "distrepro.reproduce"
ARMS_TAG = "distrepro.arms"
SEEDS_TAG = "distrepro.seeds"
OVERRIDES_TAG = "distrepro.overrides"


class ReproductionResumeError(DistreproError):
    """``reproduce --resume`` names no reproduction that can be continued."""


@dataclass(frozen=True)
class ResumedReproduction:
    """What the umbrella run recorded: enough to continue the reproduction as it started."""

    run_id: str
    experiment_id: str
    status: str
    scale: str
    arms: list[str]
    seeds: tuple[int, ...] | None
    overrides: list[Override]


def start_tags(
    scale: str, arms: list[str], seeds: Sequence[int] | None, overrides: Sequence[Override]
) -> dict[str, str]:
    """The umbrella's tags that a later ``--resume`` reads back (:func:`find_reproduction`): the seeds as
    ``--seeds`` writes them, the overrides as the ``--set`` texts they were parsed from."""
    return {
        SCALE_TAG: scale,
        ARMS_TAG: ",".join(arms),
        SEEDS_TAG: ",".join(map(str, seeds or ())),
        OVERRIDES_TAG: json.dumps([o.record() for o in overrides]),
    }


def find_reproduction(client: Any, paper: str, scale: str | None, run_id: str | None) -> ResumedReproduction:
    """The reproduction to continue: run ``run_id`` (checked to be one of ``paper``'s), else the newest of ``paper``
    at ``scale`` (default proxy) in the experiment ``distrepro/<paper>``."""
    from distrepro.tracking.mlflow_client import experiment_name

    name = experiment_name(paper)
    if run_id is not None:
        return _read(client, paper, scale, run_id)
    exp = client.get_experiment_by_name(name)
    wanted = scale or "proxy"
    runs = (
        client.search_runs(
            [exp.experiment_id],
            filter_string=f"tags.`{SCALE_TAG}` = '{wanted}'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if exp is not None
        else []
    )
    if not runs:
        raise ReproductionResumeError(
            f"--resume: no reproduction of {paper} at scale {wanted} in experiment {name!r} of this tracking store "
            f"(is MLFLOW_TRACKING_URI the one it ran with?); start one with 'distrepro reproduce {paper}'"
        )
    return _read(client, paper, scale, runs[0].info.run_id)


def _read(client: Any, paper: str, scale: str | None, run_id: str) -> ResumedReproduction:
    from mlflow.exceptions import MlflowException

    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise ReproductionResumeError(f"--resume {run_id}: no run with this id in this tracking store") from None
    tags = run.data.tags
    if SCALE_TAG not in tags:
        what = "a campaign (resume it with 'distrepro run')" if "distrepro.campaign" in tags else "not one of distrepro"
        raise ReproductionResumeError(f"--resume {run_id}: not a reproduction run ({what})")
    if tags.get("distrepro.paper") != paper:
        raise ReproductionResumeError(
            f"--resume {run_id}: a reproduction of {tags.get('distrepro.paper')}, not of {paper}; "
            f"use 'distrepro reproduce {tags.get('distrepro.paper')} --resume {run_id}'"
        )
    if scale is not None and tags[SCALE_TAG] != scale:
        raise ReproductionResumeError(
            f"--resume {run_id}: a reproduction at scale {tags[SCALE_TAG]}, not --scale {scale}; leave --scale out"
        )
    overrides = json.loads(tags.get(OVERRIDES_TAG) or "[]")
    seeds = tags.get(SEEDS_TAG) or None
    return ResumedReproduction(
        run_id,
        run.info.experiment_id,
        run.info.status,
        tags[SCALE_TAG],
        [a for a in tags.get(ARMS_TAG, "").split(",") if a],
        tuple(parse_seeds(seeds, f"tag {SEEDS_TAG} of run {run_id}")) if seeds else None,
        parse_overrides(str(o) for o in overrides),  # the --set texts the reproduction was started with
    )


def arm_runs(client: Any, experiment_id: str, umbrella: str) -> dict[str, Any]:
    """The newest campaign run of each arm of reproduction ``umbrella``, by campaign name."""
    from distrepro.tracking.mlflow_client import REPRODUCTION_TAG

    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{REPRODUCTION_TAG}` = '{umbrella}'",
        order_by=["attributes.start_time DESC"],
        max_results=10_000,
    )
    out: dict[str, Any] = {}
    for run in runs:
        if "mlflow.parentRunId" in run.data.tags:  # a seed's run: it inherits its campaign's tags
            continue
        out.setdefault(run.data.tags.get("distrepro.campaign", ""), run)
    return out


class NothingToResume(DistreproError):
    """The reproduction is FINISHED: ``reproduce --resume`` says so in one line and exits 0."""
