"""How long a ``distrepro reproduce`` will take, said before it starts.

Wall time is this machine's, not the emulated cluster's, so no plan can compute it (a plan's time is
emulated); what predicts it best is how long the same configs took here before. For each arm the estimate is
the median wall time (``final/wall_s``) of its finished runs in the tracking store with the same resolved
config (tag ``distrepro.config_sha256``, seeds excluded), times the seeds to run. Arms never run in this
store are estimated from the suite's own recorded session of the paper at that scale
(:mod:`distrepro.orchestration.recorded_times`: its wall time per run, times their runs), and the line says that
figure's machine and date; without a recorded session they get no number, and the line says so rather than
guessing. Load on a shared machine can stretch any of it (measured: 149 to 355 s for one C-ADP run on a loaded
2-core box).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from distrepro import metrics as M
from distrepro.config.run_config import RunConfig
from distrepro.orchestration.heartbeat import about
from distrepro.orchestration.recorded_times import recorded_session


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _walls(client: Any, experiment_id: str | None, cfg: RunConfig) -> list[float]:
    """Wall seconds of the finished runs of ``cfg`` (same resolved config) in the store."""
    from distrepro.orchestration.campaign import config_digest

    if experiment_id is None:
        return []
    found = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`distrepro.config_sha256` = '{config_digest(cfg)}' and attributes.status = 'FINISHED'",
        max_results=50,
    )
    return [r.data.metrics[M.FINAL_WALL_S] for r in found if M.FINAL_WALL_S in r.data.metrics]


def estimate_line(
    paper: str,
    arms: Sequence[tuple[str, RunConfig]],
    client: Any,
    experiment_id: str | None,
    scale: str | None = None,
) -> str:
    """One line: arms × seeds, and the estimated wall time from earlier runs of the same configs, else (the arms
    never run in this store) from the suite's recorded session of ``paper`` at ``scale``."""
    runs = sum(len(cfg.seeds) for _, cfg in arms)
    head = f"reproduce {paper}: {len(arms)} arms, {runs} runs"
    known, missing, missing_runs = 0.0, [], 0
    for name, cfg in arms:
        walls = _walls(client, experiment_id, cfg)
        if walls:
            known += statistics.median(walls) * len(cfg.seeds)
        else:
            missing.append(name)
            missing_runs += len(cfg.seeds)
    if not missing:
        return f"{head}; estimated {_minutes(known)} of training on this machine, from earlier runs of the same configs"
    recorded = recorded_session(paper, scale or "proxy")
    if recorded is not None:
        rest = recorded.wall_for(missing_runs)
        pace = "" if missing_runs == recorded.runs else f", {recorded.wall_for(1):.1f} s a run"
        basis = f"from the suite's recorded timings ({recorded.basis()}{pace})"
        if len(missing) == len(arms):
            fixed = "" if not pace else "; a part of a session takes more than its share (start-up, the report)"
            return (
                f"{head}; {about(rest)} (training and report), an estimate {basis}: these configs have not run in "
                f"this tracking store yet, and load on this machine stretches it{fixed}"
            )
        return (
            f"{head}; estimated {_minutes(known + rest)}: {_minutes(known)} of training for the arms run here before, "
            f"from earlier runs of the same configs, and {about(rest)} for those never run here ({', '.join(missing)}) "
            f"{basis}"
        )
    if len(missing) == len(arms):
        return f"{head}; no time estimate yet: these configs have not run in this tracking store"
    return (
        f"{head}; estimated {_minutes(known)} of training for the arms run here before, plus arms never run here "
        f"({', '.join(missing)}): no estimate for them"
    )
