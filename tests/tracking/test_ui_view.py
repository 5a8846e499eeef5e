"""distrepro's shared runs-table views, as MLflow's store reads them and as a 1,400 px browser window shows them.

The browser test serves a small store through ``distrepro ui`` (three arms of two seeds under a ``reproduce`` run,
and an exploratory arm) and opens the printed address in headless Chromium at 1,400 × 900, with MLflow's
Assistant panel closed as a user closes it once. It asks the page where each cell is drawn
(``tests/_support/headless_page.py``: ``--dump-dom`` alone lists cells that lie past the window's edge). Skipped
where Chromium is absent (CI installs it).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clirun import free_port
from hang_guard import hang_guard
from headless_page import HeadlessPage
from test_mlflow_ui import CHROMIUM

from distrepro.orchestration.arm_summary import log_arm_summary
from distrepro.report.publish import headline_cell
from distrepro.tracking.campaign_run import Campaign
from distrepro.tracking.mlflow_client import REPRODUCTION_TAG, ensure_experiment, make_client
from distrepro.tracking.ui_view import (
    CONFIRMATORY_FILTER,
    EXPLORATORY_FILTER,
    EXPLORATORY_TAG,
    EXPLORATORY_VIEW_TAG,
    HEADLINE_TAG,
    VIEW_COLUMNS,
    VIEW_TAG,
    VIEW_WIDTH_PX,
    ensure_views,
    view_state,
)

#: the runs table's width at a 1,400 px window beside MLflow's left sidebar (MLflow 3.17.2), Assistant panel closed
TABLE_PX_AT_1400 = 1145


@pytest.mark.smoke
def test_the_views_keep_seeds_under_their_arm_and_the_exploratory_runs_apart() -> None:
    for exploratory in (False, True):
        view = json.loads(view_state(exploratory))
        assert view["orderByKey"] == "attributes.start_time"  # the one sort under which MLflow nests child runs
        assert view["searchFilter"] == (EXPLORATORY_FILTER if exploratory else CONFIRMATORY_FILTER)
        shown = [c for c, _ in VIEW_COLUMNS]
        assert view["columnOrder"][: len(shown)] == shown and view["columnWidths"] == dict(VIEW_COLUMNS)
        assert {c for c in shown if c.startswith(("metrics.", "tags."))} <= set(view["selectedColumns"])
    assert VIEW_WIDTH_PX <= TABLE_PX_AT_1400 - 15  # room for a vertical scrollbar


@pytest.mark.smoke
def test_an_older_view_is_rewritten_and_a_current_one_left_alone(mlflow_uri: str) -> None:
    client = make_client(mlflow_uri)
    exp = client.create_experiment("distrepro/old-view", tags={VIEW_TAG: json.dumps({"orderByKey": "metrics.`x`"})})
    ensure_views(client, exp)
    tags = client.get_experiment(exp).tags
    assert tags[VIEW_TAG] == view_state() and tags[EXPLORATORY_VIEW_TAG] == view_state(exploratory=True)
    calls = []
    ensure_views(type("Spy", (), {"set_experiment_tag": lambda *a: calls.append(a)})(), exp, tags)
    assert calls == []  # nothing to write


@pytest.mark.smoke
def test_the_filters_split_the_runs_as_mlflow_search_reads_them(mlflow_uri: str) -> None:
    client = make_client(mlflow_uri)
    exp = ensure_experiment(client, "distrepro/filters")
    old = client.create_run(exp, run_name="before the tag existed").info.run_id
    explored = client.create_run(exp, run_name="pilot", tags={EXPLORATORY_TAG: "true"}).info.run_id
    assert [r.info.run_id for r in client.search_runs([exp], CONFIRMATORY_FILTER)] == [old]
    assert [r.info.run_id for r in client.search_runs([exp], EXPLORATORY_FILTER)] == [explored]


#: arm → (accuracy, emulated seconds) per seed, and its headline verdicts (claim → word)
ARMS = {
    "sync": ((0.71, 0.73), (812.0, 815.0), {"C1": "PASS", "C2": "FAIL"}),
    "local": ((0.69, 0.70), (405.0, 409.0), {"C1": "PASS"}),
    "gossip": ((0.65, 0.66), (512.0, 520.0), {"C2": "FAIL", "C3": "INCONCLUSIVE"}),
}


def _arm(uri: str, name: str, umbrella: str, arm: tuple, exploratory: bool = False) -> None:
    """An arm as a campaign logs it: a top-level run, a child per seed, the means and intervals over its seeds."""
    (accs, times, verdicts) = arm
    tags = {REPRODUCTION_TAG: umbrella, **({EXPLORATORY_TAG: "true"} if exploratory else {})}
    with Campaign("distrepro/uitest", name, tags, tracking_uri=uri, flush_every_s=None) as campaign:
        for seed, (acc, emu) in enumerate(zip(accs, times, strict=True)):
            with campaign.child(f"{name}/s{seed}") as cell:
                cell.log_summary({"final/val_accuracy": acc, "final/emulated_s": emu})
        log_arm_summary(campaign)
        if verdicts:
            campaign.set_tags({HEADLINE_TAG: headline_cell(verdicts)})


def _store(uri: str) -> None:
    for exploratory in (False, True):
        tags = {EXPLORATORY_TAG: "true"} if exploratory else {}
        with Campaign("distrepro/uitest", "reproduce uitest (proxy)", tags, tracking_uri=uri) as umbrella:
            assert umbrella.run_id is not None
            arms = {"pilot": ((0.5, 0.6), (100.0, 101.0), {})} if exploratory else ARMS
            for name, arm in arms.items():
                _arm(uri, name, umbrella.run_id, arm, exploratory)


#: per row: the run's name, and for each column of the view that a user must see, whether its cell is drawn inside
#: the window and on top at its centre (not under a panel, not clipped by the table), and its text
_CELLS = """(() => {
  const cols = %s;
  const out = [];
  for (const name of document.querySelectorAll('.ag-row [col-id="attributes.`Run Name`"]')) {
    const row = name.closest('.ag-row').getAttribute('row-index');
    const cells = {};
    for (const col of cols) {
      const cell = document.querySelector(`.ag-row[row-index="${row}"] [col-id="${col}"]`);
      if (!cell) { cells[col] = [false, '']; continue; }
      const r = cell.getBoundingClientRect();
      const inside = r.left >= 0 && r.right <= window.innerWidth && r.top >= 0 && r.bottom <= window.innerHeight;
      const top = inside && cell.contains(document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2));
      cells[col] = [top, cell.innerText.trim()];
    }
    out.push([Number(row), (name.querySelector('a') || name).innerText.trim(), cells]);
  }
  return JSON.stringify(out.sort((a, b) => a[0] - b[0]).map(r => r.slice(1)));
})()"""
_CLOSE_ASSISTANT = """(() => {
  const close = document.querySelector('[data-assistant-ui] button[aria-label="Close"]');
  if (close) close.click();
  return !document.querySelector('[data-assistant-ui] button[aria-label="Close"]');
})()"""
_EXPAND = """(() => {
  for (const name of document.querySelectorAll('.ag-row [col-id="attributes.`Run Name`"]'))
    if ((name.querySelector('a') || name).innerText.trim() === %s) {
      name.querySelector('button').click();
      return true;
    }
  return false;
})()"""


def _rows(page: HeadlessPage, url: str, wanted: str) -> list:
    page.goto(url)
    page.wait_for("document.querySelectorAll('.ag-row').length > 0", hang_guard(60))
    page.wait_for(_CLOSE_ASSISTANT, hang_guard(30))
    page.wait_for(f"document.body.innerText.includes({json.dumps(wanted)})", hang_guard(30))
    time.sleep(1)  # the table lays its columns out again once the panel has gone
    columns = [c for c, _ in VIEW_COLUMNS if c.startswith(("metrics.", "tags."))]
    return json.loads(page.evaluate(_CELLS % json.dumps(columns)))


@pytest.fixture
def served(mlflow_uri: str, tmp_path: Path):
    """``distrepro ui`` on a small store: its process and the addresses it printed, by label."""
    _store(mlflow_uri)
    port = free_port()
    command = [sys.executable, "-m", "distrepro.cli", "ui", "--store", mlflow_uri, "--port", str(port)]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        deadline = time.monotonic() + hang_guard(120)
        while not any("exploratory runs:" in line for line in lines) and time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            lines.append(line)
        found = dict(re.findall(r"^  (.+?): (http://\S+)$", "".join(lines), flags=re.M))
        assert found, f"distrepro ui printed no address: {lines} {proc.stderr.read() if proc.poll() else ''}"  # type: ignore[union-attr]
        yield proc, found
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        proc.wait(timeout=hang_guard(60))


@pytest.mark.server
@pytest.mark.slow  # a store of 14 runs, a server and a browser: over 20 s
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")
def test_at_1400_px_each_arm_shows_its_time_accuracy_and_headline_verdicts(served, tmp_path: Path) -> None:
    proc, found = served
    with HeadlessPage(CHROMIUM, tmp_path, 1400, 900) as page:  # type: ignore[arg-type]
        rows = _rows(page, found["distrepro/uitest"], "reproduce uitest")
        page.screenshot(tmp_path / "table.png")
        names = [name for name, _ in rows]
        assert names == ["gossip", "local", "sync", "reproduce uitest (proxy)"]  # newest first; no seed, no pilot
        for name, cells in rows[:3]:
            for column, (visible, text) in cells.items():
                assert visible, f"{name}: {column} is not in sight at 1,400 px"
                assert text not in ("", "-"), f"{name}: {column} is empty"
            assert cells[f"tags.`{HEADLINE_TAG}`"][1] == headline_cell(ARMS[name][2])
            assert float(cells["metrics.`acc_lo95`"][1]) <= float(cells["metrics.`acc_mean`"][1])
        page.wait_for(_EXPAND % json.dumps("local"), hang_guard(10))  # its seeds are under it
        page.wait_for("document.body.innerText.includes('local/s1')", hang_guard(30))
        names = [name for name, _ in json.loads(page.evaluate(_CELLS % "[]"))]
        assert names[names.index("local") + 1 : names.index("local") + 3] == ["local/s1", "local/s0"]

        pilot = _rows(page, found["distrepro/uitest, exploratory runs"], "pilot")
        assert [name for name, _ in pilot] == ["pilot", "reproduce uitest (proxy)"]
    proc.send_signal(signal.SIGINT)  # how a served UI ends
    assert proc.wait(timeout=hang_guard(60)) == 0
    assert "MLflow UI stopped" in proc.stdout.read()  # type: ignore[union-attr]
