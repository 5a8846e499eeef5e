"""Decent-DP's Fig. 6 grid (methods/decentdp/fig6.py): computed once per code and profile version, in its own
experiment, and rebuilding it leaves the committed csv, and so the checkout, as it was; a fresh report folder copies
the committed grid when its key is this code's, and retrains when an input changed."""

from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from distrepro.api.report_context import EvalPoint
from distrepro.plugins.registry import plugin_module
from distrepro.reproduction import report_context
from distrepro.reproduction.report_context import HarnessReportContext, code_sources, code_version, plugin_context

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "reports" / "decentdp" / "fig6.csv"


def _committed() -> dict[str, float]:
    with COMMITTED.open(newline="") as fh:
        return {f"fig6-{r['setup']}-{r['gpus']}-{r['method']}": float(r["ms_per_iter"]) for r in csv.DictReader(fh)}


@pytest.fixture
def replayed(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """``ctx.train`` answers each cell with the committed ms/iteration (no training); the configs it got."""
    fig6, ms, seen = plugin_module("decentdp", "fig6"), _committed(), []

    def train(self: HarnessReportContext, config: dict[str, Any]) -> list[EvalPoint]:
        seen.append(config)
        steps = config["budget"]["steps"]
        return [EvalPoint(fig6.WARMUP, 0.0), EvalPoint(steps, ms[config["name"]] / 1000 * (steps - fig6.WARMUP))]

    monkeypatch.setattr(HarnessReportContext, "train", train)
    return seen


def test_rebuilding_the_grid_leaves_the_checkout_clean(tmp_path: Path, monkeypatch, replayed, capsys) -> None:
    monkeypatch.setattr(plugin_module("decentdp", "fig6"), "REFERENCE", tmp_path / "no-reference")
    repo = tmp_path / "checkout"  # the committed csv and the ignore rules, in a repository of their own
    (repo / "reports" / "decentdp").mkdir(parents=True)
    shutil.copy(COMMITTED, repo / "reports" / "decentdp" / "fig6.csv")
    shutil.copy(REPO / ".gitignore", repo / ".gitignore")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-f", ".gitignore", "reports/decentdp/fig6.csv"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "grid"], cwd=repo, check=True)
    monkeypatch.chdir(repo)
    products = plugin_module("decentdp", "products")
    made = products.build(plugin_context(Path("reports/decentdp"), "proxy"))
    assert {p.name for p in made} == {"fig6.csv", "fig6.png"}
    assert len(replayed) == 36 and {c["paper"] for c in replayed} == {"decentdp-fig6"}  # its own experiment
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("Fig. 6 grid: cell ")]
    assert len(lines) == 36 and lines[-1].startswith("Fig. 6 grid: cell 36/36") and "ETA" in lines[-1]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    assert status.stdout == ""  # no wall time in the csv; the key and the png are ignored
    products.build(plugin_context(Path("reports/decentdp"), "proxy"))  # same code and profiles: nothing trains
    assert len(replayed) == 36
    assert "unchanged" in capsys.readouterr().err


def test_the_grid_key_follows_the_code_and_profiles(tmp_path: Path, monkeypatch) -> None:
    fig6 = plugin_module("decentdp", "fig6")
    ctx = plugin_context(tmp_path, "proxy")  # the key is the harness's version of the cells' code (ctx.code_version)
    sources = code_sources(fig6.CELL_PLUGINS)
    assert {"fig6.py", "a40-25gbe-16.yaml", "network.py"} <= {p.name for p in sources}  # code, profiles, clock
    assert {"gossip.py", "models.py", "run_config.py"} <= {p.name for p in sources}  # the api, models, defaults
    before = ctx.code_version(fig6.CELL_PLUGINS)
    assert ctx.code_version(fig6.CELL_PLUGINS) == before == code_version(fig6.CELL_PLUGINS)  # one grid per version
    edited = tmp_path / "a40-25gbe-16.yaml"
    edited.write_text((REPO / "hardware_profiles" / "a40-25gbe-16.yaml").read_text() + "# a changed profile\n")
    monkeypatch.setattr(report_context, "code_sources", lambda methods=(): [*sources, edited])
    assert ctx.code_version(fig6.CELL_PLUGINS) != before


def test_a_fresh_folder_copies_the_committed_grid_and_a_changed_input_retrains(
    tmp_path: Path, monkeypatch, replayed, capsys
) -> None:
    fig6 = plugin_module("decentdp", "fig6")
    reference = tmp_path / "checkout" / "reports" / "decentdp"  # the committed pair, keyed on this code
    reference.mkdir(parents=True)
    shutil.copy(COMMITTED, reference / "fig6.csv")
    (reference / "fig6.key").write_text(fig6.key_text(code_version(fig6.CELL_PLUGINS), COMMITTED.read_text()))
    monkeypatch.setattr(fig6, "REFERENCE", reference)
    fresh = tmp_path / "fresh" / "reports" / "decentdp"
    made = fig6.build(plugin_context(fresh, "proxy"))
    assert replayed == []  # nothing trained
    assert (fresh / "fig6.csv").read_bytes() == COMMITTED.read_bytes()  # the committed grid, byte for byte
    assert (fresh / "fig6.key").read_text() == (reference / "fig6.key").read_text()
    assert {p.name for p in made} == {"fig6.csv", "fig6.png"} and (fresh / "fig6.png").stat().st_size > 0
    assert f"36 cells read from the cache {reference / 'fig6.csv'}" in capsys.readouterr().err
    sources = code_sources(fig6.CELL_PLUGINS)  # an input changes: a profile the cells read
    edited = tmp_path / "a40-25gbe-16.yaml"
    edited.write_text((REPO / "hardware_profiles" / "a40-25gbe-16.yaml").read_text() + "# a changed profile\n")
    monkeypatch.setattr(report_context, "code_sources", lambda methods=(): [*sources, edited])
    again = tmp_path / "again"
    fig6.build(plugin_context(again, "proxy"))
    assert len(replayed) == 36  # neither the reference's key nor a folder's matches: every cell retrains
    assert (again / "fig6.key").read_text() != (reference / "fig6.key").read_text()  # the changed input's key
    assert (again / "fig6.csv").read_bytes() == COMMITTED.read_bytes()  # the cells as replayed: the same grid
    assert "read from the cache" not in capsys.readouterr().err


def test_a_csv_edited_under_an_unchanged_key_retrains(tmp_path: Path, monkeypatch, replayed, capsys) -> None:
    fig6 = plugin_module("decentdp", "fig6")
    reference = tmp_path / "checkout" / "reports" / "decentdp"
    reference.mkdir(parents=True)
    lines = COMMITTED.read_text().splitlines(keepends=True)
    lines[1] = ",".join([*lines[1].split(",")[:3], "1.00", lines[1].split(",")[4]])  # one cell edited by hand
    (reference / "fig6.csv").write_text("".join(lines))
    (reference / "fig6.key").write_text(fig6.key_text(code_version(fig6.CELL_PLUGINS), COMMITTED.read_text()))
    monkeypatch.setattr(fig6, "REFERENCE", reference)
    fig6.build(plugin_context(tmp_path / "fresh", "proxy"))
    assert len(replayed) == 36  # the key names the code's grid, the csv is not it: every cell retrains
    assert (tmp_path / "fresh" / "fig6.csv").read_bytes() == COMMITTED.read_bytes()
    assert "read from the cache" not in capsys.readouterr().err


@pytest.mark.smoke
def test_the_committed_grid_is_this_checkouts() -> None:
    """The committed ``fig6.key`` is this checkout's code and profiles, over the committed csv: a change to the
    harness's timing or engine code must come with the grid it gives (``distrepro reproduce decentdp`` retrains it
    into ``reports/decentdp/``; commit ``fig6.csv`` and ``fig6.key``), else every fresh report retrains it."""
    fig6 = plugin_module("decentdp", "fig6")
    committed_key = (REPO / "reports" / "decentdp" / "fig6.key").read_text()
    assert committed_key == fig6.key_text(code_version(fig6.CELL_PLUGINS), COMMITTED.read_text()), (
        "reports/decentdp/fig6.key is stale: retrain the grid (distrepro reproduce decentdp) and commit fig6.csv "
        "and fig6.key"
    )


def test_each_cells_window_is_a_whole_number_of_its_topologys_periods() -> None:
    """The per-iteration time weighs every round of a time-varying topology once: the window after the warm-up is
    a multiple of the topology's own period (the plugin's ``rounds``), 2 log2 N for the AER on N nodes."""
    fig6, topology = plugin_module("decentdp", "fig6"), plugin_module("decentdp", "topology")
    names = {"decent-aer": "alternating-exp-ring", "decent-exp": "one-peer-exp", "sgp-exp": "one-peer-exp"}
    for setup, sizes in fig6.SETUPS.items():
        for gpus in sizes:
            for method, name in names.items():
                period = len(topology.rounds(name, gpus, fig6.GPUS_PER_NODE[setup]))
                window = fig6.cell_steps(method, gpus, setup) - fig6.WARMUP
                assert window >= fig6.MIN_WINDOW and window % period == 0, (setup, gpus, method)
    # 8 nodes of 4 A100: three exponents, an intra- and an inter-node round each
    assert fig6.cell_steps("decent-aer", 32, "a100-ib") - fig6.WARMUP == 6
