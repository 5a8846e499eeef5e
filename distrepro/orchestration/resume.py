"""``distrepro run CONFIG --resume CAMPAIGN_RUN_ID``: what may be resumed, and how each seed goes on.

A campaign is continued only under the config it started with. Its runs' params *are* that
config, MLflow cannot change a logged param, and a run that mixes two configs (a 30-epoch history
ending in a 2-step run marked FINISHED) is worse than no run. So before anything is reopened or
trained, the resolved config is compared field by field with what the campaign logged:

* the campaign (:func:`check_campaign`): the parent run's params against the new config. This
  reads one run with the standard library (:mod:`distrepro.tracking.storeprobe`), so a wrong run id or config
  is one line within a second, before torch or mlflow is imported;
* its cells (:func:`plan_seeds`, once the jobs are built): every child run's params against the
  cell's resolved params, which adds what the code filled in (method defaults, per-worker batch
  sizes); a code change between the crash and the resume is caught here.

Seeds are what a resume may legitimately narrow: ``--seeds`` may name a subset of the campaign's
seeds (continue only those now). A seed outside the campaign is refused, since the parent's params
list the campaign's seeds and cannot change; the parent is FINISHED only once each of its seeds has
a FINISHED child run.

Per seed: a FINISHED child is skipped. An unfinished child with a complete checkpoint
(``checkpoint.every_steps``, distributed engine) is reopened and continues from it. Otherwise the
seed starts over in a new child run tagged ``distrepro.resumes`` with the old run's id: the old run
keeps its history and status (FAILED if it was left RUNNING by a process or server that died), so
no metric history mixes two attempts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distrepro.errors import DistreproError
from distrepro.tracking.campaign_lock import check_free, is_lock_param
from distrepro.tracking.run_reader import read_run
from distrepro.tracking.runlog import logged_params

if TYPE_CHECKING:
    from distrepro.config.run_config import RunConfig

MAX_LISTED = 5  # differing fields named in the one-line refusal
_SEED_KEY = re.compile(r"seed|seeds(\.\d+)?")


class ResumeError(DistreproError):
    """``--resume`` names a run that cannot be continued with this config."""


class NothingToResume(DistreproError):
    """The campaign is FINISHED: ``distrepro run`` says so in one line and exits 0."""


@dataclass(frozen=True)
class ResumeTarget:
    run_id: str
    status: str  # the parent's: FAILED, KILLED, or RUNNING when its process (or the server) died
    seeds: list[int]  # the campaign's seeds, as its parent run logged them


@dataclass
class SeedPlan:
    """What a resume does with one seed; the default (nothing set) is a new child run."""

    seed: int
    finished: str | None = None  # a FINISHED child: the seed is skipped
    reopen: str | None = None  # an unfinished child, continued from ``checkpoint``
    checkpoint: Path | None = None
    replaces: str | None = None  # the newest unfinished child, which a new run replaces


@dataclass
class ResumePlan:
    seeds: dict[int, SeedPlan]  # every seed of the campaign and of this resume
    stale: list[str] = field(default_factory=list)  # children left RUNNING by a process that died: to mark FAILED


def _show(value: str | None, missing: str) -> str:
    if value is None:
        return missing
    return value if len(value) <= 60 else value[:57] + "..."


def differences(logged: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """``key: old (campaign) vs new (now)`` for each field that differs; seeds are compared elsewhere, and the
    campaign's lock (:mod:`distrepro.tracking.campaign_lock`, params of its own) is no field of the config."""
    out = []
    for key in sorted(logged.keys() | now.keys()):
        old, new = logged.get(key), now.get(key)
        if old != new and not _SEED_KEY.fullmatch(key) and not is_lock_param(key):
            out.append(f"{key}: {_show(old, '(not logged)')} (campaign) vs {_show(new, '(not set)')} (now)")
    return out


def _listing(diffs: list[str]) -> str:
    more = len(diffs) - MAX_LISTED
    return "; ".join(diffs[:MAX_LISTED]) + (f"; and {more} more field(s)" if more > 0 else "")


def check_campaign(cfg: RunConfig | None, uri: str, run_id: str) -> ResumeTarget | None:
    """Vet ``--resume run_id`` for ``cfg`` from the parent run alone (``cfg`` None: only that it is a campaign).

    The CLI calls it once without a config, before loading one imports the method plugin and torch
    (seconds on a busy machine), so a wrong run id is reported at once; then again with the config.

    Raises :class:`ResumeError` for an unknown run, a run that is not a campaign, or a differing
    config, :class:`~distrepro.tracking.campaign_lock.CampaignLocked` for a campaign a live process writes, and
    :class:`NothingToResume` for a FINISHED campaign (after the config check, so a user who meant another campaign
    learns that first).
    """
    what = f"--resume {run_id}"
    run = read_run(uri, run_id)
    if run is None:
        raise ResumeError(
            f"{what}: no run with this id in tracking store {uri} (is MLFLOW_TRACKING_URI the campaign's?)"
        )
    if run.lifecycle_stage != "active":
        raise ResumeError(
            f"{what}: the run is deleted in {uri}; restore it with 'mlflow runs restore --run-id {run_id}'"
        )
    parent = run.tags.get("mlflow.parentRunId")
    if parent:
        seed = run.tags.get("distrepro.seed", "?")
        raise ResumeError(
            f"{what}: this is one cell (seed {seed}) of campaign {parent}, not a campaign; use --resume {parent}"
        )
    name = run.tags.get("distrepro.campaign")
    if name is None and "distrepro.reproduce" in run.tags:  # the umbrella run of ``reproduce``
        paper = run.tags.get("distrepro.paper", "PAPER")
        raise ResumeError(
            f"{what}: this is the reproduction run of {paper} ({run.tags['distrepro.reproduce']}), not a campaign; "
            f"continue it with 'distrepro reproduce {paper} --resume {run_id}'"
        )
    if name is None:
        raise ResumeError(f"{what}: not a distrepro campaign run (it has no distrepro.campaign tag) in {uri}")
    if run.status != "FINISHED":  # a live writer: said now, before the config is loaded (the lock decides later)
        check_free("campaign run", run_id, run.params, run.tags)
    if cfg is None:
        return None
    seeds = sorted(int(v) for k, v in run.params.items() if re.fullmatch(r"seeds\.\d+", k) and v.isdigit())
    diffs = differences(run.params, logged_params(cfg.model_dump(mode="json")))
    if not set(cfg.seeds) <= set(seeds):
        diffs.append(f"seeds: {seeds} (campaign) vs {cfg.seeds} (now; a resume runs only seeds of its campaign)")
    if diffs:
        raise ResumeError(
            f"{what}: the config differs from campaign '{name}': {_listing(diffs)}; resume with the campaign's "
            "config (its config.yaml artifact) or start a new campaign without --resume"
        )
    if run.status == "FINISHED":
        raise NothingToResume(f"campaign run {run_id} ('{name}') is FINISHED: nothing to resume")
    return ResumeTarget(run_id, run.status, seeds)


def plan_seeds(
    client: Any, target: ResumeTarget, cells: Mapping[int, Mapping[str, str]], checkpoint_dir: Path
) -> ResumePlan:
    """Check every child run against the resolved cells (``cells``: seed → params as logged), then
    decide what each seed does. Reads only: nothing is reopened until every child has passed.

    A child that did not finish may have been cut off while it logged its params (the store went
    away): only the params it has are compared, and one cut off before its tags has no seed and is
    only marked FAILED. Seeds of the campaign that this resume does not run are planned too, so
    the caller can tell which have finished.
    """
    from distrepro.job.checkpoint_folders import latest_complete

    experiment_id = client.get_run(target.run_id).info.experiment_id
    children = client.search_runs(
        [experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{target.run_id}'", max_results=10_000
    )
    reference = next(iter(cells.values()))  # seeds outside this resume: every field but the seed is shared
    by_seed: dict[str, list[Any]] = {}
    for child in children:
        seed = child.data.tags.get("distrepro.seed", "")
        by_seed.setdefault(seed, []).append(child)
        if not seed.isdigit():
            continue
        logged, expected = child.data.params, cells.get(int(seed), reference)
        if child.info.status != "FINISHED":
            expected = {k: v for k, v in expected.items() if k in logged}
        diffs = differences(logged, expected)
        if diffs:
            raise ResumeError(
                f"--resume {target.run_id}: seed {seed} (run {child.info.run_id}) was logged with another resolved "
                f"config: {_listing(diffs)} (did the code's defaults change?); start a new campaign without --resume"
            )
    plan = ResumePlan({})
    for seed in sorted(set(cells) | set(target.seeds)):
        runs = sorted(by_seed.get(str(seed), []), key=lambda r: r.info.start_time or 0, reverse=True)
        seed_plan = plan.seeds[seed] = SeedPlan(seed)
        done = [r for r in runs if r.info.status == "FINISHED"]
        if done:
            seed_plan.finished = done[0].info.run_id
        elif runs and seed in cells:
            newest = runs[0].info.run_id
            seed_plan.checkpoint = latest_complete(checkpoint_dir / newest)
            if seed_plan.checkpoint is not None:
                seed_plan.reopen = newest
            else:
                seed_plan.replaces = newest
    reopened = {p.reopen for p in plan.seeds.values()}
    plan.stale = [c.info.run_id for c in children if c.info.status == "RUNNING" and c.info.run_id not in reopened]
    return plan
