"""``distrepro reproduce <paper>``: run every arm a paper's claims need, then write the report.

The arms come from the paper's ``paper.yaml`` (``setup.arms``): each names a method, the
method parameters that tell it apart, and the run config that produces it. Reproducing runs one
campaign per arm (every seed), all in the experiment ``distrepro/<paper>``, then builds the
report from MLflow, restricted to those campaigns. Training and judging stay separate: the
report reads only what the runs logged.

Arms marked ``optional`` (e.g. the real DeepSpeed arm, which needs an extra install and the
torch.distributed engine) run only when named in ``arms`` or ``with_arms``.

A method folder may also ship ``products.py`` (outputs beyond the arms, such as a figure's grid), built
with the report and skipped with it (``report=False``, ``--no-report``): see :func:`_products`.

Scales: ``proxy`` (default) uses each arm's ``config``; ``paper`` uses the sibling file with
``.paper.yaml`` in place of ``.yaml`` (e.g. the real dataset and the paper's epochs), which must
exist; ``mid`` the sibling ``.mid.yaml``: a CPU-sized run (<= 30 min per paper on 2 cores) that
reaches the regime the paper's accuracy and convergence claims need (the claims' ``regime:``
conditions check that it does); ``gpu`` the sibling ``.gpu.yaml``: the same claims on a recipe sized for one
80 GB GPU in <= 1 hour per paper (``device: cuda``; CIFAR-10 and ResNet-18 from a local folder), priced by
``distrepro plan`` and documented in each method's README.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrepro.claims.schema import TRAINING_SCALES, Scale, at_scale, claim_arms
from distrepro.config.run_config import RunConfig, load_config
from distrepro.engine.device import resolve_device
from distrepro.errors import ConfigError
from distrepro.orchestration.campaign import CampaignResult, run_campaign


@dataclass
class Reproduction:
    paper: str
    campaigns: dict[str, CampaignResult]
    report: Any | None
    run_id: str = ""  # the umbrella run: the arms' campaign runs are its children, the report its artifacts
    experiment_id: str = ""


def _param_overrides(params: dict[str, Any]) -> list[str]:
    import json

    return [f"method_params.{k}={json.dumps(v)}" for k, v in params.items()]


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
    executor: Any = None,
) -> Reproduction:
    """Run the arms of ``paper`` and build its report; see the module docstring.

    One *umbrella* run (``reproduce <paper> (<scale>)``) stands for the reproduction in MLflow: the report is
    logged on it once, rather than on every arm. Each arm's campaign run names it in the tag
    ``distrepro.reproduction`` and stays a top-level row of the runs table (its seeds are its children), so the
    arms' metric columns show without expanding anything. The umbrella ends FINISHED, FAILED or KILLED as the
    reproduction does."""
    from distrepro.claims.papers import (
        UnknownPaperError,
        arm_config_path,
        arms_at_scale,
        find_paper,
        known_papers,
        scale_only,
    )
    from distrepro.plugins.roots import repo_root

    info = find_paper(paper, root)
    if not info.method_dirs:
        raise UnknownPaperError(paper, known_papers(root))
    if info.spec is None or not info.spec.setup.arms:
        where = info.path or (root or repo_root()) / "methods"
        raise ConfigError(where, "setup.arms", f"paper '{paper}' declares no arms to reproduce")
    default = [
        name
        for name, arm in info.spec.setup.arms.items()
        if not arm.optional and scale_only(arm.config) in (None, scale)  # a paper-only arm waits for --scale paper
    ]
    if scale in TRAINING_SCALES:  # only the arms of the claims these scales re-decide (accuracy and convergence)
        moved = at_scale(info.spec, scale, arms_at_scale(info, scale, root))
        needed = {a for c in moved.claims if c.scale == scale for a in claim_arms(c)}
        default = [name for name in default if name in needed]
    chosen = list(dict.fromkeys([*(arms or default), *(with_arms or [])]))
    unknown = [a for a in chosen if a not in info.spec.setup.arms]
    if unknown:
        raise ConfigError(info.path, "setup.arms", f"unknown arm(s) {unknown}; known: {list(info.spec.setup.arms)}")
    assert info.path is not None  # a paper with arms was read from its paper.yaml
    # every arm's config is loaded (its method params validated) before the first arm trains
    configs: list[tuple[str, Path, RunConfig]] = []
    for name in chosen:
        arm = info.spec.setup.arms[name]
        path = arm_config_path(info.path, name, arm.config, scale, root)
        sets = [f"paper={paper}", f"scale={scale}", f"name={arm.campaign or name}", f"method={arm.method}"]
        sets += _param_overrides(arm.params) + list(overrides or [])
        if seeds:
            sets.append(f"seeds=[{seeds}]")
        configs.append((name, path, load_config(path, sets)))
    if _trains_here(executor):  # a device this host lacks (a gpu recipe on a laptop) is one line now, before the
        for _, path, cfg in configs:  # reproduction's run is opened (a remote worker checks its own)
            resolve_device(cfg.device, path)
    from distrepro.orchestration.observer import heartbeat, wants_bars
    from distrepro.tracking.mlflow_client import DESCRIPTION_TAG, Campaign, experiment_name, resolve_tracking_uri
    from distrepro.tracking.storeprobe import check_store

    uri = resolve_tracking_uri()
    check_store(uri)
    _say_estimate(paper, [(name, cfg) for name, _, cfg in configs], uri)
    umbrella = Campaign(
        experiment_name(paper),
        f"reproduce {paper} ({scale})",
        {"distrepro.paper": paper, "distrepro.reproduce": scale, "distrepro.arms": ",".join(chosen)},
        tracking_uri=uri,
    )
    campaigns: dict[str, CampaignResult] = {}
    built = None
    with umbrella:
        umbrella.set_tags({DESCRIPTION_TAG: _umbrella_note(paper, chosen)})
        pool = _executor(executor, [cfg for _, _, cfg in configs])
        if pool is not None:  # every arm's cells at once, so that no worker idles at the end of an arm
            from distrepro.orchestration.executors.dispatch import CampaignRequest, run_campaigns

            requests = [
                CampaignRequest(cfg, path, reproduction=umbrella.run_id, system_metrics=system_metrics)
                for _, path, cfg in configs
            ]
            done = run_campaigns(requests, pool, show_progress)
            campaigns = {name: result for (name, _, _), result in zip(configs, done, strict=True)}
        for name, path, cfg in configs if pool is None else []:
            campaigns[name] = run_campaign(
                cfg,
                source=path,
                show_progress=show_progress,
                tracking_uri=uri,
                reproduction=umbrella.run_id,
                system_metrics=system_metrics,
            )
        if report:  # products go to the report's folder and are part of it: train only means no products either
            from distrepro.report.build import build_report

            with heartbeat(lambda: f"report for {paper}", enabled=not wants_bars(show_progress)):
                _products(info.method_dirs, paper, scale, root)
                ids = [c.parent_run_id for c in campaigns.values()]
                built = build_report(
                    paper,
                    campaigns=ids,
                    tracking_uri=uri,
                    root=root,
                    scale=scale,
                    sensitivity=sensitivity,
                    sensitivity_samples=sensitivity_samples,
                    show_progress=show_progress,
                )
    assert umbrella.run_id is not None
    return Reproduction(paper, campaigns, built, umbrella.run_id, umbrella.experiment_id or "")


def _trains_here(executor: Any) -> bool:
    """Whether the cells of ``executor`` (an :class:`~distrepro.orchestration.executors.selection.ExecutorSpec`, an
    executor, or None) train on this machine: in this process, a local pool, a local Ray, submitit's local mode."""
    if executor is None:
        return True
    if hasattr(executor, "remote"):  # an executor already made says so itself
        return not executor.remote
    kind = getattr(executor, "kind", "local")
    return bool(
        kind == "local"
        or (kind == "ray" and not getattr(executor, "ray_address", None))
        or (kind == "slurm" and getattr(executor, "slurm_cluster", None) == "local")
    )


def _say_estimate(paper: str, arms: list[tuple[str, RunConfig]], uri: str) -> None:
    """Print the estimated wall time (:mod:`distrepro.orchestration.estimate`) before anything trains."""
    import sys

    from distrepro.orchestration.estimate import estimate_line
    from distrepro.tracking.mlflow_client import experiment_name, make_client

    client = make_client(uri)
    exp = client.get_experiment_by_name(experiment_name(paper))
    print(estimate_line(paper, arms, client, exp.experiment_id if exp else None), file=sys.stderr, flush=True)


def _umbrella_note(paper: str, arms: list[str]) -> str:
    return (
        f"`distrepro reproduce {paper}`: one run per arm ({', '.join(f'`{a}`' for a in arms)}, tagged "
        "`distrepro.reproduction` = this run's id), each with one child run per seed named `<arm>/s<seed>`. The "
        "report (`report/report.html`) is logged here once; each arm's run carries its claims' verdicts as tags "
        "`verdict.<claim>`."
    )


def _executor(spec: Any, cfgs: list[RunConfig]) -> Any:
    """The executor of ``spec`` (:class:`~distrepro.orchestration.executors.selection.ExecutorSpec`, or an
    executor already made); ``None`` trains the arms here, one cell after the other."""
    if spec is None or hasattr(spec, "run"):
        return spec
    from distrepro.orchestration.executors.selection import make_executor

    return make_executor(spec, cfgs)


def _products(method_dirs: list[Path], paper: str, scale: Scale, root: Path | None) -> None:
    """Outputs a paper needs beyond its arms' runs, e.g. a figure whose cells are not claims (Decent-DP's
    Fig. 6 grid). After the arms, when a report is wanted, each of the paper's method folders with a
    ``products.py`` has its ``build(out_dir, scale)`` called with ``reports/<paper>`` (the report's folder); it
    writes files there and returns their paths. The report does not read them: claims stay data in ``paper.yaml``.
    Products can take minutes (Decent-DP's grid simulates 36 clusters), which a train-only run should not pay."""
    from distrepro.plugins.registry import plugin_module

    for folder in method_dirs:
        if (folder / "products.py").is_file():
            plugin_module(folder.name, "products", root).build(Path("reports") / paper, scale)


def arm_extras(paper: str, arm_names: list[str], root: Path | None = None) -> list[str]:
    """The pip extras the named arms need (``setup.arms.<arm>.extra``), sorted, for the nox sessions.

    The noxfile may not parse YAML (it runs before anything but nox is installed), so it asks
    ``distrepro extras`` inside the session's virtualenv. Unknown arm names are left to
    :func:`reproduce`, which rejects them with the list of known ones.
    """
    from distrepro.claims.papers import find_paper

    info = find_paper(paper, root)
    arms = info.spec.setup.arms if info.spec is not None else {}
    extras = (arms[a].extra for a in arm_names if a in arms)
    return sorted({e for e in extras if e})
