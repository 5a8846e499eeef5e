"""``distrepro reproduce PAPER --resume``: an interrupted reproduction continues from its interrupt line's own
command; finished arms and seeds are not trained again; the umbrella and every arm end FINISHED.

(Named apart from ``tests/orchestration/test_resume.py``, which covers ``run --resume``: pytest's default import
mode needs distinct basenames.)"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cellruns import WALL_CLOCK, campaign_metrics, session_processes, sigint_as_at_a_terminal, wait_for_line
from clirun import cli_env, without_heartbeats
from hang_guard import hang_guard

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
        reproduce("tinypaper", seeds=(0, 1), report=False, show_progress=False, root=paper_root)
    monkeypatch.setattr(campaign_module, "_run_cell", REAL_RUN_CELL)
    result = reproduce("tinypaper", report=False, show_progress=False, root=paper_root, resume=LATEST)
    assert set(result.campaigns) == {"sync", "local"} and result.skipped == []
    assert [c.seed for c in result.campaigns["sync"].cells] == [1]  # seed 0 had finished
    assert [c.seed for c in result.campaigns["local"].cells] == [0, 1]
    client = make_client(mlflow_uri)
    assert client.get_run(result.run_id).info.status == "FINISHED"
    assert client.get_run(result.run_id).data.tags["distrepro.seeds"] == "0,1"  # what the resume read back


def _arms(uri: str, umbrella: str) -> dict[str, Any]:
    """arm name → its campaign run in reproduction ``umbrella``."""
    return {
        r.data.tags["distrepro.campaign"]: r
        for r in _runs(uri)
        if r.data.tags.get("distrepro.reproduction") == umbrella and "mlflow.parentRunId" not in r.data.tags
    }


def _arm_results(uri: str, umbrella: str) -> dict[str, Any]:
    """Every arm's summary (but wall-clock keys) and every seed's metric histories (bits), of ``umbrella``."""
    out = {}
    for name, arm in _arms(uri, umbrella).items():
        summary = {k: v for k, v in arm.data.metrics.items() if not any(w in k for w in WALL_CLOCK)}
        out[name] = (summary, campaign_metrics(uri, arm.info.run_id))
    return out


def _reproduce(argv: list[str], uri: str, cwd: Path) -> subprocess.Popen[str]:
    """``distrepro reproduce ...`` in a session of its own, Ctrl-C-able as at a terminal."""
    return subprocess.Popen(
        [sys.executable, "-m", "distrepro.cli", "reproduce", *argv],
        cwd=cwd,
        env=cli_env(uri),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=sigint_as_at_a_terminal,
    )


@pytest.mark.slow
@pytest.mark.timeout(900)  # three reproductions with two spawned workers each, on a loaded two-core machine
def test_a_reproduction_interrupted_under_jobs_2_resumes_to_the_same_results(
    paper_root: Path, mlflow_uri: str, tmp_path: Path
) -> None:
    """Ctrl-C to ``reproduce --jobs 2`` once a cell has finished, then its hint's ``--resume`` (under ``--jobs 2``):
    every arm ends with the metrics of an uninterrupted reproduction, bit for bit, and no cell that had finished
    is trained again or marked KILLED."""
    tiny = paper_root / "methods" / "tiny" / "tiny.yaml"  # cells long enough that Ctrl-C finds some unfinished
    tiny.write_text(tiny.read_text().replace("budget: {steps: 4}", "budget: {steps: 400}"))
    argv = ["tinypaper", "--jobs", "2", "--no-report", "--no-progress"]
    whole = _reproduce(argv, mlflow_uri, tmp_path)
    _, err = whole.communicate(timeout=hang_guard(600))
    assert whole.returncode == 0, err[-3000:]
    (reference,) = [r.info.run_id for r in _runs(mlflow_uri) if r.data.tags.get("distrepro.reproduce")]

    cut = _reproduce(argv, mlflow_uri, tmp_path)
    try:
        seen = wait_for_line(cut, ": done in")  # a cell has finished: the pool's worker closed its run
        os.killpg(cut.pid, signal.SIGINT)
        _, rest = cut.communicate(timeout=hang_guard(300))
    finally:
        if cut.poll() is None:
            os.killpg(cut.pid, signal.SIGKILL)
    err = "".join(seen) + rest
    assert cut.returncode == 130 and "Traceback" not in err, err[-3000:]
    assert session_processes(cut.pid) == []
    hint = re.search(r"reproduction run (\w+) marked KILLED; continue it with: distrepro (.+)$", err.strip())
    assert hint is not None, err[-3000:]
    umbrella, command = hint.group(1), shlex.split(hint.group(2))
    assert command == ["reproduce", *argv, "--resume", umbrella]
    before = {r.info.run_id: r for r in _runs(mlflow_uri) if r.data.tags.get("distrepro.reproduction") == umbrella}
    cells = [r for r in before.values() if "mlflow.parentRunId" in r.data.tags]
    finished = {r.info.run_id for r in cells if r.info.status == "FINISHED"}
    assert finished and len(finished) < 4, {r.info.run_name: r.info.status for r in cells}  # a half-done one

    again = _reproduce(command[1:], mlflow_uri, tmp_path)
    _, err = again.communicate(timeout=hang_guard(600))
    assert again.returncode == 0, err[-3000:]
    after = {r.info.run_id: r for r in _runs(mlflow_uri)}
    for rid in finished:  # neither trained again nor closed again
        assert after[rid].info.status == "FINISHED" and after[rid].info.end_time == before[rid].info.end_time
    assert _arm_results(mlflow_uri, umbrella) == _arm_results(mlflow_uri, reference)


@pytest.mark.smoke
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
    err = without_heartbeats(capsys.readouterr().err)  # a loaded machine may name the lookup in a heartbeat first
    assert err.startswith("distrepro: error: ") and err.strip().count("\n") == 0 and fragment in err, err
