"""How long a ``distrepro reproduce`` will take, said before it starts.

Wall time is this machine's, not the emulated cluster's, so no plan can compute it (a plan's time is
emulated); what predicts it is how long the same configs took here before. For each arm the estimate is
the median wall time (``final/wall_s``) of its finished runs in the tracking store with the same resolved
config (tag ``distrepro.config_sha256``, seeds excluded), times the seeds to run. Arms never run in this
store get no number, and the line says so rather than guessing. Load on a shared machine can stretch
any of it (measured: 149 to 355 s for one C-ADP run on a loaded 2-core box).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from distrepro import metrics as M
from distrepro.config.run_config import RunConfig


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def estimate_line(paper: str, arms: Sequence[tuple[str, RunConfig]], client: Any, experiment_id: str | None) -> str:
    """One line: arms × seeds, and the estimated wall time from earlier runs of the same configs."""
    from distrepro.orchestration.campaign import config_digest

    runs = sum(len(cfg.seeds) for _, cfg in arms)
    head = f"reproduce {paper}: {len(arms)} arms, {runs} runs"
    known, missing = 0.0, []
    for name, cfg in arms:
        walls: list[float] = []
        if experiment_id is not None:
            found = client.search_runs(
                [experiment_id],
                filter_string=f"tags.`distrepro.config_sha256` = '{config_digest(cfg)}' and attributes.status = "
                "'FINISHED'",
                max_results=50,
            )
            walls = [r.data.metrics[M.FINAL_WALL_S] for r in found if M.FINAL_WALL_S in r.data.metrics]
        if walls:
            known += statistics.median(walls) * len(cfg.seeds)
        else:
            missing.append(name)
    if not missing:
        return f"{head}; estimated {_minutes(known)} of training on this machine, from earlier runs of the same configs"
    if len(missing) == len(arms):
        return f"{head}; no time estimate yet: these configs have not run in this tracking store"
    return (
        f"{head}; estimated {_minutes(known)} of training for the arms run here before, plus arms never run here "
        f"({', '.join(missing)}): no estimate for them"
    )
