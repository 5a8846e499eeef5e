"""What an MLflow user sees of a reproduction, checked in headless Chromium against a real ``mlflow server``.

The runs table opened by the printed link has metric columns (each arm's mean and interval) and the verdict
tags; the chart view draws charts (the arms' runs carry metrics); the compare view of the seed runs tells
them apart by name (``<arm>/s<seed>``). Skipped where Chromium is absent (CI installs it). What a 1,400 px window
shows of each arm, cell by cell: tests/tracking/test_ui_view.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow_server import CHROMIUM, mlflow_server
from tiny_paper import write_paper_root

from distrepro.reproduction.reproduce import Reproduction, reproduce
from distrepro.tracking.ui_view import ui_url

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, migrated_mlflow_db: Path) -> Iterator[tuple[str, Reproduction]]:
    """One reproduction behind one server for the module (each costs seconds of CPU); the tests only read them."""
    tmp_path = tmp_path_factory.mktemp("served")
    mlflow_uri = f"sqlite:///{shutil.copyfile(migrated_mlflow_db, tmp_path / 'mlflow.db')}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
        result = reproduce("tinypaper", show_progress=False, root=write_paper_root(tmp_path, patch))
    with mlflow_server(mlflow_uri, tmp_path) as base:
        yield base, result


def _dom(url: str, workdir: Path) -> str:
    browser = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={workdir / 'p'}"]
    # wide enough that every column of distrepro's view is rendered (the table draws only the columns in sight)
    browser += ["--virtual-time-budget=30000", "--window-size=3800,1000", "--dump-dom", url]
    return subprocess.run(browser, capture_output=True, text=True, timeout=180, check=False).stdout


def test_runs_table_charts_and_compare_view(served: tuple[str, Reproduction], tmp_path: Path) -> None:
    base, result = served
    exp = result.experiment_id
    table = _dom(ui_url(exp, base), tmp_path / "table")
    assert "shared view" in table  # distrepro's view, from the experiment tag
    for column in ("acc_mean", "acc_lo95", "emu_s_mean", "seeds_finished", "distrepro.verdicts"):
        assert column in table, column
    assert ">sync<" in table and ">local<" in table and "reproduce tinypaper (proxy)" in table

    charts = _dom(ui_url(exp, base).replace("/runs?", "/runs?compareRunsMode=CHART&"), tmp_path / "charts")
    sections = {m[0]: int(m[1]) for m in re.findall(r">([\w/]+)</div><div[^>]*>\((\d+)\)<", charts)}
    assert sections.get("final", 0) >= 8, sections  # the arms' means and intervals, one chart each

    seeds = [c.run_id for campaign in result.campaigns.values() for c in campaign.cells]
    query = urllib.parse.urlencode({"runs": json.dumps(seeds), "experiments": json.dumps([exp])})
    compare = _dom(f"{base}/#/compare-runs?{query}&workflowType=machine_learning", tmp_path / "compare")
    for name in ("sync/s0", "sync/s1", "local/s0", "local/s1"):
        assert name in compare, name


def test_runs_table_on_a_laptop_nests_the_seeds_under_their_arms(
    served: tuple[str, Reproduction], tmp_path: Path
) -> None:
    """At 1366 × 768 the table's rows are the arms, newest first, then the ``reproduce`` run (with the report and the
    headline tally); the seeds are under their arm, not rows of their own; the first columns' headers read whole."""
    base, result = served
    url = ui_url(result.experiment_id, base)
    browser = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}"]
    browser += ["--virtual-time-budget=30000", "--window-size=1366,768"]
    dom = subprocess.run([*browser, "--dump-dom", url], capture_output=True, text=True, timeout=180).stdout
    shot = tmp_path / "table.png"
    subprocess.run([*browser, f"--screenshot={shot}", url], capture_output=True, timeout=180, check=False)
    (tmp_path / "table.html").write_text(dom)

    def row_of(text: str) -> int:  # the table row (ag-grid's row-index) whose cells hold ``text``
        at = dom.index(text)
        return int(re.findall(r'row-index="(\d+)"', dom[:at])[-1])

    assert [row_of(">local<"), row_of(">sync<"), row_of("reproduce tinypaper (proxy)")] == [0, 1, 2]
    assert ">sync/s0<" not in dom and ">local/s1<" not in dom  # under their arms, until one is expanded
    for header in ("Run Name", "Created", "emu_s_mean", "acc_mean"):  # (the Assistant panel covers the rest)
        assert header in dom, header
    assert shot.is_file() and shot.stat().st_size > 10_000
