"""Time each row of the hostile-input table, one at a time, as the user's subprocess.

    python benchmarks/hostile_rows.py OUT_DIR

Writes the rows' inputs under OUT_DIR (:func:`hostile_cases.write_inputs`), migrates one SQLite store there
first (so no row pays for it), then prints one JSON line per row: exit status, wall and CPU seconds (user +
system, from ``wait4``), the load average, and the error line. BENCHMARKS.md ("Hostile inputs")
shows the numbers; ``tests/test_hostile_inputs.py`` asserts the same rows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "_support"))

import hostile_cases  # noqa: E402  (a test helper, found through the path above)

from distrepro.tracking.mlflow_client import make_client  # noqa: E402


def main(out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rows = hostile_cases.cases(hostile_cases.write_inputs(out))
    uri = f"sqlite:///{out / 'mlflow.db'}"
    make_client(uri).search_experiments()  # migrate the store now
    for case in rows:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DISTREPRO_DEBUG"))}
        env |= {"MLFLOW_TRACKING_URI": uri, "MLFLOW_DISABLE_TELEMETRY": "true", **case.env}
        started = time.monotonic()
        with (out / "stderr").open("w") as err, (out / "stdout").open("w") as std:
            proc = subprocess.Popen(
                [sys.executable, "-m", "distrepro.cli", *case.argv], cwd=out, env=env, stdout=std, stderr=err
            )
            _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        lines = [line for line in (out / "stderr").read_text().splitlines() if line.startswith("distrepro: ")]
        row = {
            "id": case.id,
            "rc": proc.returncode,
            "wall_s": round(wall, 2),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "load": round(os.getloadavg()[0], 1),
            "line": lines[-1] if lines else None,
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
