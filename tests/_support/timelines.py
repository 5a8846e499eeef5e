"""A hand-made timeline (the ``timeline.csv`` a run logs) for the report tests: no training needed to draw one."""

from __future__ import annotations

import pandas as pd


def timeline_csv(speeds: list[float]) -> str:
    """Six synchronous steps of ranks computing at ``speeds`` (steps per second): each computes, the faster ones idle
    until the slowest is done, then all communicate for 0.3 s."""
    rows, t = [], [0.0] * len(speeds)
    for step in range(6):
        for r, v in enumerate(speeds):
            rows.append((r, "compute", t[r], t[r] + 1 / v, step))
            t[r] += 1 / v
        end = max(t)
        for r in range(len(speeds)):
            if t[r] < end:
                rows.append((r, "idle", t[r], end, step))
            rows.append((r, "comm", end, end + 0.3, step))
            t[r] = end + 0.3
    return pd.DataFrame(rows, columns=["rank", "kind", "start_s", "end_s", "step"]).to_csv(index=False)
