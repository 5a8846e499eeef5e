"""``distrepro reproduce PAPER --resume``: an interrupted reproduction continues from its interrupt line's own
command; finished arms and seeds are not trained again; the umbrella and every arm end FINISHED.

(Named apart from ``tests/orchestration/test_resume.py``, which covers ``run --resume``: pytest's default import
mode needs distinct basenames.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

import distrepro.orchestration.campaign as campaign_module
from distrepro.cli import main
from distrepro.tracking.mlflow_client import make_client

REAL_RUN_CELL = campaign_module._run_cell


def _runs(uri: str) -> list[Any]:
    client = make_client(uri)
    exp = client.get_experiment_by_name("distrepro/tinypaper")
    return client.search_runs([exp.experiment_id], max_results=1000)


def _interrupt_at_cell(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Ctrl-C as the ``n``-th cell (counting from 1, across arms) is about to train."""
    real, calls = REAL_RUN_CELL, []

    def run_cell(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(campaign_module, "_run_cell", run_cell)


def test_an_interrupted_reproduction_resumes_with_the_command_its_line_prints(
    paper_root: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # arms sync (seeds 0, 1) then local (seeds 0, 1): Ctrl-C as local's seed 1 starts, the 4th cell
    _interrupt_at_cell(monkeypatch, 4)
    assert main(["reproduce", "tinypaper", "--no-report", "--no-progress"]) == 130
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    hint = re.search(r"reproduction run (\w+) marked KILLED; continue it with: distrepro (.+)$", line)
    assert hint is not None, err
    umbrella, command = hint.group(1), shlex.split(hint.group(2))
    assert command == ["reproduce", "tinypaper", "--no-report", "--no-progress", "--resume", umbrella]
    before = {r.info.run_id: r for r in _runs(mlflow_uri)}
    assert before[umbrella].info.status == "KILLED"
    finished_before = {rid for rid, r in before.items() if r.info.status == "FINISHED"}
    assert len(finished_before) == 4  # sync's campaign and its 2 seeds, local's seed 0

    monkeypatch.setattr(campaign_module, "_run_cell", REAL_RUN_CELL)  # no interrupt this time
    assert main(command) == 0
    out, err = capsys.readouterr()
    assert "arm sync: campaign run" in out and "(finished before: skipped)" in out, out
    assert "seed 0: finished in run" in err, err  # local's seed 0 is not trained again

    after = {r.info.run_id: r for r in _runs(mlflow_uri)}
    statuses = {r.info.run_name: r.info.status for r in after.values()}
    assert set(statuses.values()) == {"FINISHED"}, statuses
    assert all(after[rid].info.end_time == before[rid].info.end_time for rid in finished_before)  # not re-run
    new = set(after) - set(before)
    assert len(new) == 1  # the one cell left: local's seed 1, in a new child run of local's campaign
    (cell,) = (after[rid] for rid in new)
    assert cell.data.tags["distrepro.campaign"] == "local" and cell.data.tags["distrepro.seed"] == "1"
    arms = [r for r in after.values() if r.data.tags.get("distrepro.reproduction") == umbrella]
    assert sorted(r.data.tags["distrepro.campaign"] for r in arms if "mlflow.parentRunId" not in r.data.tags) == [
        "local",
        "sync",
    ]  # resumed in place: no second campaign run of an arm

    assert main(["reproduce", "tinypaper", "--no-report", "--no-progress", "--resume"]) == 0  # the newest: done
    assert f"reproduction run {umbrella} (tinypaper, proxy) is FINISHED" in capsys.readouterr().err


def test_resume_of_an_arm_that_never_started_starts_it_under_the_same_umbrella(
    paper_root: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from distrepro.reproduction.reproduce import LATEST, reproduce

    _interrupt_at_cell(monkeypatch, 2)  # sync's seed 1: local never starts
    with pytest.raises(KeyboardInterrupt):
        reproduce("tinypaper", seeds="0,1", report=False, show_progress=False, root=paper_root)
    monkeypatch.setattr(campaign_module, "_run_cell", REAL_RUN_CELL)
    result = reproduce("tinypaper", report=False, show_progress=False, root=paper_root, resume=LATEST)
    assert set(result.campaigns) == {"sync", "local"} and result.skipped == []
    assert [c.seed for c in result.campaigns["sync"].cells] == [1]  # seed 0 had finished
    assert [c.seed for c in result.campaigns["local"].cells] == [0, 1]
    client = make_client(mlflow_uri)
    assert client.get_run(result.run_id).info.status == "FINISHED"
    assert client.get_run(result.run_id).data.tags["distrepro.seeds"] == "0,1"  # what the resume read back


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--resume", "--seeds", "0"], "leave out --seeds"),
        (["--resume", "--set", "budget.steps=2"], "leave out --set"),
        (["--resume"], "no reproduction of tinypaper at scale proxy"),
        (["--resume", "0" * 32], f"--resume {'0' * 32}: no run with this id"),
    ],
)
def test_resume_refusals_are_one_line(
    paper_root: Path, mlflow_uri: str, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    assert main(["reproduce", "tinypaper", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("distrepro: error: ") and err.strip().count("\n") == 0 and fragment in err, err
