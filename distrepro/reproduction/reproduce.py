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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from distrepro.claims.papers import PaperInfo, UnknownPaperError, find_paper, known_papers
from distrepro.claims.schema import Scale
from distrepro.config.overrides import Override
from distrepro.config.run_config import index_spans
from distrepro.errors import ConfigError, DistreproError
from distrepro.orchestration.campaign import CampaignResult
from distrepro.orchestration.executors.interface import Executor
from distrepro.orchestration.executors.selection import ExecutorSpec
from distrepro.orchestration.heartbeat import Steps, watched
from distrepro.report.results_inputs import INPUTS_TAG, inputs_digest
from distrepro.reproduction.reporting import report_reproduction
from distrepro.reproduction.resume import NothingToResume, ResumedReproduction, find_reproduction, start_tags
from distrepro.reproduction.selection import ArmConfig, arm_configs, choose_arms
from distrepro.reproduction.training import check_devices, say_estimate, train_arms

if TYPE_CHECKING:
    from distrepro.tracking.campaign_run import Campaign


@dataclass
class Reproduction:
    paper: str
    campaigns: dict[str, CampaignResult]
    report: Any | None
    run_id: str = ""  # the umbrella run: the arms' campaign runs name it, the report is its artifacts
    experiment_id: str = ""
    skipped: list[str] = field(default_factory=list)  # arms a resume found finished (their cells ran before)
    exploratory: bool = False  # on seeds outside the scale's record: its runs are in the exploratory view


def reproduce(
    paper: str,
    scale: Scale | None = None,
    seeds: Sequence[int] | None = None,
    overrides: Sequence[Override] = (),
    arms: list[str] | None = None,
    with_arms: list[str] | None = None,
    report: bool = True,
    show_progress: bool | None = None,
    root: Path | None = None,
    sensitivity: bool = False,
    sensitivity_samples: int | None = None,
    system_metrics: bool = False,
    executor: ExecutorSpec | Executor | None = None,
    dependence: bool = True,
    resume: str | None = None,
) -> Reproduction:
    """Run the arms of ``paper`` at ``scale`` (default proxy) and build its report; see the module docstring. ``seeds``
    (default: the scale's pre-registered ones, else each config's) and ``overrides`` apply to every arm's config.

    ``resume``: continue a reproduction instead (:mod:`distrepro.reproduction.resume`): :data:`LATEST` for the
    newest of ``paper`` at ``scale``, else the id of its umbrella run; its arms, seeds and overrides are the ones it
    started with, so ``seeds``, ``overrides``, ``arms`` and ``with_arms`` must not be given.

    Each arm's campaign run names the umbrella in the tag ``distrepro.reproduction`` and stays a top-level row of
    the runs table (its seeds are its children), so the arms' metric columns show without expanding anything. The
    umbrella is a top-level row too, after its arms in the shared view (newest first); it ends FINISHED, FAILED or
    KILLED as the reproduction does. An exploratory one tags all its runs (:mod:`distrepro.tracking.ui_view`)."""
    from distrepro.tracking.mlflow_client import DESCRIPTION_TAG, resolve_tracking_uri

    info = _paper_with_arms(paper, root)
    uri = resolve_tracking_uri()
    with watched(_preparing(paper)):  # named by a heartbeat if it takes long
        start = _start(paper, info, _Asked(scale, seeds, overrides, arms, with_arms, resume), uri)
        exploratory = _exploratory(paper, info.path, start)
        chosen = choose_arms(info, start.scale, start.arms, with_arms, root)
        configs = _load_arms(paper, info, chosen, start, executor, uri, root)
        skipped, resumes, configs = _resume_arms(paper, start, configs, uri)
        umbrella = _umbrella(paper, info, chosen, start, uri, root, exploratory)
    built = None
    with umbrella:
        run_id = umbrella.run_id
        assert run_id is not None
        umbrella.set_tags({DESCRIPTION_TAG: _umbrella_note(paper, chosen)})
        trained = train_arms(configs, executor, uri, run_id, show_progress, system_metrics, resumes, exploratory)
        campaigns = {name: skipped.get(name) or trained[name] for name in chosen if name in skipped or name in trained}
        if report:  # products go to the report's folder and are part of it: train only means no products either
            built = report_reproduction(
                paper, info.method_dirs, campaigns, start.scale, uri, root,
                sensitivity, sensitivity_samples, show_progress, dependence, exploratory,
            )  # fmt: skip
    return Reproduction(paper, campaigns, built, run_id, umbrella.experiment_id or "", list(skipped), exploratory)


def _preparing(paper: str) -> Steps:
    """What the heartbeat says while the reproduction prepares: seconds, minutes on a loaded machine or store."""
    steps = Steps(f"reproduce {paper}")
    steps.enter("loading the arms' configs, checking the store, estimating the time, opening the reproduction's run")
    return steps


@dataclass(frozen=True)
class _Asked:
    """What the caller asked for: the scale, the seeds, the overrides, the arms, and the reproduction to resume."""

    scale: Scale | None
    seeds: Sequence[int] | None
    overrides: Sequence[Override]
    arms: list[str] | None
    with_arms: list[str] | None
    resume: str | None


@dataclass(frozen=True)
class _Start:
    """How the reproduction runs: as asked, or, resumed, as it started (then ``resumed`` is its umbrella's record)."""

    scale: Scale
    arms: list[str] | None
    seeds: tuple[int, ...] | None
    overrides: tuple[Override, ...]
    resumed: ResumedReproduction | None


def _paper_with_arms(paper: str, root: Path | None) -> PaperInfo:
    """``paper``'s record; an unknown paper, or one that declares no arms, is one line naming it."""
    from distrepro.plugins.roots import repo_root

    info = find_paper(paper, root)
    if not info.method_dirs:
        raise UnknownPaperError(paper, known_papers(root))
    if info.spec is None or not info.spec.setup.arms:
        where = info.path or (root or repo_root()) / "methods"
        raise ConfigError(where, "setup.arms", f"paper '{paper}' declares no arms to reproduce")
    return info


def _start(paper: str, info: PaperInfo, asked: _Asked, uri: str) -> _Start:
    """The scale, arms, seeds and overrides to run: those of the umbrella run being resumed (none may be given
    then), else those asked for, the seeds defaulting to the scale's pre-registered ones."""
    from distrepro.tracking.mlflow_client import make_client
    from distrepro.tracking.storeprobe import check_store

    if asked.resume is None:
        scale = asked.scale or "proxy"
        seeds = tuple(asked.seeds) if asked.seeds is not None else _registered_seeds(info.path, scale)
        return _Start(scale, asked.arms, seeds, tuple(asked.overrides), None)
    given = [flag for flag, value in _start_flags(asked.seeds, asked.overrides, asked.arms, asked.with_arms) if value]
    if given:
        raise DistreproError(
            f"--resume continues a reproduction with the arms, seeds and --set it started with: leave out "
            f"{', '.join(given)}"
        )
    check_store(uri)
    wanted = None if asked.resume == LATEST else asked.resume
    resumed = find_reproduction(make_client(uri), paper, asked.scale, wanted)
    scale = cast("Scale", resumed.scale) or "proxy"
    return _Start(scale, resumed.arms, resumed.seeds, tuple(resumed.overrides), resumed)


def _load_arms(
    paper: str,
    info: PaperInfo,
    chosen: list[str],
    start: _Start,
    executor: ExecutorSpec | Executor | None,
    uri: str,
    root: Path | None,
) -> list[ArmConfig]:
    """Every chosen arm's config, loaded, then what can be refused or said before anything trains: a device this
    host lacks, a store that cannot be used, the estimated wall time, seeds too few for a claim."""
    from distrepro.tracking.storeprobe import check_store

    configs = arm_configs(info, chosen, start.scale, start.seeds, start.overrides, root)
    check_devices(configs, executor)
    check_store(uri)
    say_estimate(paper, start.scale, configs, uri)
    if start.seeds is not None:  # below a claim's min_seeds: said now, not after the training
        from distrepro.report.next_steps import seed_warnings

        fewest = min(len(arm.config.seeds) for arm in configs)
        for line in seed_warnings(info, chosen, start.scale, fewest, root):
            print(line, file=sys.stderr, flush=True)
    return configs


def _resume_arms(
    paper: str, start: _Start, configs: list[ArmConfig], uri: str
) -> tuple[dict[str, CampaignResult], dict[str, str], list[ArmConfig]]:
    """For a resumed reproduction, :func:`_plan_resume`, decided before the umbrella is RUNNING again (a finished
    one stays FINISHED: nothing to resume); a new one skips nothing and resumes nothing."""
    from distrepro.tracking.mlflow_client import experiment_name

    resumed = start.resumed
    if resumed is None:
        return {}, {}, configs
    skipped, resumes, left = _plan_resume(resumed, configs, uri, experiment_name(paper))
    if resumed.status == "FINISHED" and not left:
        raise NothingToResume(
            f"reproduction run {resumed.run_id} ({paper}, {start.scale}) is FINISHED, every arm with it: nothing to "
            "resume"
        )
    return skipped, resumes, left


def _exploratory(paper: str, paper_file: Path | None, start: _Start) -> bool:
    """Whether this reproduction runs seeds outside its scale's pre-registration record (fresh or resumed: a resume
    runs the seeds it started with): then its runs are exploratory, judged in a report of their own
    (``reports/<paper>/exploratory``), and the registered report is left as it is. Said on stderr."""
    from distrepro.claims.preregistration import registered_seeds

    found = registered_seeds(paper_file, start.scale)
    if found is None or start.seeds is None:
        return False
    outside = sorted(set(start.seeds) - set(found[0]))
    if not outside:
        return False
    print(
        f"seeds {index_spans(outside)} are outside the {start.scale} record's confirmatory seeds "
        f"{index_spans(found[0])}: exploratory runs, judged in reports/{paper}/exploratory/; the registered report "
        "is left as it is",
        file=sys.stderr,
        flush=True,
    )
    return True


def _umbrella(
    paper: str, info: PaperInfo, chosen: list[str], start: _Start, uri: str, root: Path | None, exploratory: bool
) -> Campaign:
    """The umbrella run (not yet open): new, tagged with how it started (what a resume reads back), or the resumed
    one."""
    from distrepro.tracking.campaign_run import Campaign
    from distrepro.tracking.mlflow_client import experiment_name
    from distrepro.tracking.ui_view import EXPLORATORY_TAG

    return Campaign(
        experiment_name(paper),
        f"reproduce {paper} ({start.scale})",
        {
            "distrepro.paper": paper,
            **start_tags(start.scale, chosen, start.seeds, start.overrides),
            INPUTS_TAG: inputs_digest(info, root),  # RESULTS.md tells runs on other paper.yaml/configs apart
            **({EXPLORATORY_TAG: "true"} if exploratory else {}),
        },
        tracking_uri=uri,
        resume_run_id=start.resumed.run_id if start.resumed is not None else None,
        kind="reproduction run",
    )


def _registered_seeds(paper_file: Path | None, scale: str) -> tuple[int, ...] | None:
    """``--seeds`` when none is given: the scale's pre-registered confirmatory seeds, said on stderr; None (the
    configs' own seeds) where the scale has no record."""
    from distrepro.claims.preregistration import registered_seeds

    found = registered_seeds(paper_file, scale)
    if found is None:
        return None
    seeds, path = found
    print(
        f"seeds {index_spans(seeds)}: the confirmatory seeds pre-registered in "
        f"{path.parent.parent.name}/{path.parent.name}/{path.name} (--seeds runs others, as exploratory runs)",
        file=sys.stderr,
        flush=True,
    )
    return tuple(seeds)


#: ``resume`` of :func:`reproduce` for "the newest reproduction of the paper at this scale"
LATEST = "latest"


def _start_flags(
    seeds: Sequence[int] | None, overrides: Sequence[Override], arms: list[str] | None, with_arms: list[str] | None
) -> list[tuple[str, object]]:
    return [("--seeds", seeds), ("--set", overrides), ("--arms", arms), ("--with", with_arms)]


def _plan_resume(
    resumed: ResumedReproduction, configs: list[ArmConfig], uri: str, experiment: str
) -> tuple[dict[str, CampaignResult], dict[str, str], list[ArmConfig]]:
    """For a resumed reproduction: the arms whose campaign FINISHED (skipped, as results for the report), the
    campaign run each unfinished arm continues, and the configs of the arms left to train (unfinished or new)."""
    from distrepro.reproduction.resume import arm_runs
    from distrepro.tracking.mlflow_client import make_client

    runs = arm_runs(make_client(uri), resumed.experiment_id, resumed.run_id)
    skipped: dict[str, CampaignResult] = {}
    resumes: dict[str, str] = {}
    left: list[ArmConfig] = []
    for arm in configs:
        run = runs.get(arm.config.name)
        if run is not None and run.info.status == "FINISHED":
            print(f"arm {arm.name}: campaign run {run.info.run_id} finished, skipped", file=sys.stderr, flush=True)
            skipped[arm.name] = CampaignResult(experiment, run.info.run_id, uri, [], resumed.experiment_id)
            continue
        if run is not None:
            resumes[arm.name] = run.info.run_id
        left.append(arm)
    return skipped, resumes, left


def _umbrella_note(paper: str, arms: list[str]) -> str:
    return (
        f"`distrepro reproduce {paper}`: one top-level run per arm beside this one "
        f"({', '.join(f'`{a}`' for a in arms)}, tagged `distrepro.reproduction` = this run's id), each with one "
        "child run per seed named `<arm>/s<seed>`. The report (`report/report.html`) is logged here once; each "
        "arm's run carries its claims' verdicts as tags "
        "`verdict.<claim>`."
    )
