"""Are a campaign's cells the same wherever they ran? Compare two tracking stores cell by cell, bit for bit.

    python benchmarks/executor_equality.py sqlite:///jobs1/mlflow.db sqlite:///jobs2/mlflow.db

Cells are matched by (campaign name, seed); every metric series is compared as (step, value bits), except the
wall-clock ones, which measure the machine (BENCHMARKS.md, "Campaign executors").
"""

from __future__ import annotations

import struct
import sys
from typing import Any

from distrepro import metrics as M
from distrepro.tracking.mlflow_client import make_client

WALL_CLOCK = {M.WALL_S, M.FINAL_WALL_S, M.THROTTLED_S}


def cells(uri: str) -> dict[tuple[str, int], Any]:
    client = make_client(uri)
    out = {}
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], max_results=10_000):
            tags = run.data.tags
            if "mlflow.parentRunId" in tags and tags.get("distrepro.seed", "").isdigit():
                out[(tags["distrepro.campaign"], int(tags["distrepro.seed"]))] = run
    return out


def series(uri: str, run: Any) -> dict[str, list[tuple[int, bytes]]]:
    client = make_client(uri)
    return {
        key: sorted((p.step, struct.pack("<d", p.value)) for p in client.get_metric_history(run.info.run_id, key))
        for key in sorted(run.data.metrics)
        if key not in WALL_CLOCK
    }


def main(reference: str, other: str) -> int:
    ref, oth = cells(reference), cells(other)
    differ = [key for key, run in ref.items() if key not in oth or series(reference, run) != series(other, oth[key])]
    print(f"{len(ref) - len(differ)} of {len(ref)} cells identical; differ or missing: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
