"""Start-up cost of `distrepro run` (one step, one evaluation): paired, alternating runs of several installs.

    python benchmarks/startup_pairs.py ROUNDS OUTDIR LABEL=VENV [LABEL=VENV ...]

Each label gets its own folder and SQLite store (a warm-up run creates it, so MLflow's migrations are not timed);
then ROUNDS rounds run every label once, the order reversed every other round, each run timed for CPU (user +
sys of the process and its children, from getrusage) and wall, with the 1-minute load average before it. On a
shared machine CPU time swings with the load, so compare labels within a round (paired), never across sessions.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ARGS = ["run", "configs/quickstart.yaml", "--set", "budget.steps=1", "--set", "eval.times=1", "--seeds", "0"]


def once(label: str, venv: str, out: Path) -> dict[str, float | str | int]:
    folder = out / label
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{folder}/mlflow.db", "PYTHONDONTWRITEBYTECODE": "1"}
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([f"{venv}/bin/distrepro", *ARGS, "--no-progress"], cwd=folder, env=env, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"label": label, "rc": proc.returncode, "cpu": round(cpu, 2), "wall": round(wall, 2), "load1": load}


def main() -> None:
    rounds, out = int(sys.argv[1]), Path(sys.argv[2])
    venvs = dict(arg.split("=", 1) for arg in sys.argv[3:])
    for label, venv in venvs.items():
        print("warm-up", once(label, venv, out), flush=True)
    rows = []
    for r in range(rounds):
        for label in list(venvs) if r % 2 == 0 else list(venvs)[::-1]:
            rows.append({**once(label, venvs[label], out), "round": r})
            print(json.dumps(rows[-1]), flush=True)
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    first = next(iter(venvs))
    for label in venvs:
        mine = [x for x in rows if x["label"] == label]
        line = f"{label}: CPU median {statistics.median(x['cpu'] for x in mine):.2f} s, wall median "
        line += f"{statistics.median(x['wall'] for x in mine):.2f} s"
        if label != first:
            by_round = {(x["round"], x["label"]): x["cpu"] for x in rows}
            diffs = [by_round[(r, label)] - by_round[(r, first)] for r in range(rounds)]
            line += f"; paired CPU - {first}: mean {statistics.mean(diffs):+.2f} s (sd {statistics.pstdev(diffs):.2f})"
        print(line)


if __name__ == "__main__":
    main()
