"""``distrepro run CONFIG --resume CAMPAIGN``: only under the campaign's config, never mixing two runs.

The campaign in these tests is interrupted (Ctrl-C) in seed 1 of seeds 0, 1, 2, after its run had
logged a point, as a user's killed 30-epoch campaign had: seed 0 FINISHED, seed 1 KILLED, seed 2
never started, the parent KILLED. Refusals run the real command line, timed; resumes that train
run in-process.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from clirun import run_cli, write_config

import distrepro.orchestration.campaign as campaign_module
from distrepro.cli import main
from distrepro.tracking.mlflow_client import make_client


@dataclass
class Killed:
    config: Path
    uri: str
    cwd: Path
    parent: str
    children: dict[int, str]  # seed -> run id

    def runs(self) -> dict[str, Any]:
        client = make_client(self.uri)
        exp = client.get_experiment_by_name("distrepro/adhoc")
        return {r.info.run_id: r for r in client.search_runs([exp.experiment_id])}


class _CtrlCInSeed1:
    """The real engine, but seed 1 logs a point at step 120 and is interrupted."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name = inner, inner.name

    def run_cell(self, job: Any, sink: Any, observer: Any, **kw: Any) -> Any:
        if job.seed == 1:
            sink.logger.log_metrics({"val_accuracy": 0.992}, step=120)
            sink.flush()
            raise KeyboardInterrupt
        return self.inner.run_cell(job, sink, observer, **kw)


@pytest.fixture
def killed(tmp_path: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch) -> Killed:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    config = write_config(tmp_path, name="resumable", seeds=[0, 1, 2])
    real = campaign_module.get_engine
    monkeypatch.setattr(campaign_module, "get_engine", lambda name: _CtrlCInSeed1(real(name)))
    assert main(["run", str(config), "--no-progress"]) == 130
    monkeypatch.setattr(campaign_module, "get_engine", real)
    client = make_client(mlflow_uri)
    exp = client.get_experiment_by_name("distrepro/adhoc")
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    children = {int(r.data.tags["distrepro.seed"]): r.info.run_id for r in runs if r is not parent}
    assert parent.info.status == "KILLED" and sorted(children) == [0, 1]
    return Killed(config, mlflow_uri, cwd, parent.info.run_id, children)


def _history(uri: str, run_id: str, key: str = "val_accuracy") -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in make_client(uri).get_metric_history(run_id, key))


def test_a_different_config_is_refused_in_one_line_and_nothing_is_reopened(killed: Killed) -> None:
    before = {rid: (r.info.status, r.info.end_time) for rid, r in killed.runs().items()}
    done = run_cli(
        ["run", str(killed.config), "--no-progress", "--resume", killed.parent, "--set", "budget.steps=2"],
        killed.uri,
        killed.cwd,
    )
    assert done.rc == 2 and len(done.err_lines) == 1, done.err
    assert "budget.steps: 3 (campaign) vs 2 (now)" in done.err and killed.parent in done.err
    # no wall-time bound (it measures the machine's load): minutes of retries end in run_cli's hang guard and fail
    # the exit status; "nothing trained" is checked on the runs below
    after = {rid: (r.info.status, r.info.end_time) for rid, r in killed.runs().items()}
    assert after == before  # no run reopened, created or closed
    assert _history(killed.uri, killed.children[1]) == [(120, 0.992)]

    seeds = run_cli(
        ["run", str(killed.config), "--no-progress", "--resume", killed.parent, "--seeds", "0,5"],
        killed.uri,
        killed.cwd,
    )
    assert seeds.rc == 2 and len(seeds.err_lines) == 1, seeds.err
    assert "seeds: [0, 1, 2] (campaign) vs [0, 5] (now" in seeds.err


def test_resume_needs_a_campaign_run(killed: Killed) -> None:
    child = run_cli(
        ["run", str(killed.config), "--no-progress", "--resume", killed.children[0]], killed.uri, killed.cwd
    )
    assert child.rc == 2 and len(child.err_lines) == 1, child.err
    assert f"use --resume {killed.parent}" in child.err

    client = make_client(killed.uri)
    foreign = client.create_run(client.get_experiment_by_name("distrepro/adhoc").experiment_id).info.run_id
    other = run_cli(["run", str(killed.config), "--no-progress", "--resume", foreign], killed.uri, killed.cwd)
    assert other.rc == 2 and len(other.err_lines) == 1, other.err
    assert "not a distrepro campaign run" in other.err and foreign in other.err


def test_same_config_resumes_seed_by_seed_then_says_finished(
    killed: Killed, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    # only seed 1 now: it starts over in a new run; the killed run keeps its own history
    assert main(["run", str(killed.config), "--no-progress", "--resume", killed.parent, "--seeds", "1"]) == 0
    err = capsys.readouterr().err
    assert f"run {killed.children[1]} has no checkpoint" in err and "seeds [2] still to run" in err
    runs = killed.runs()
    new1 = next(rid for rid, r in runs.items() if r.data.tags.get("distrepro.resumes") == killed.children[1])
    assert runs[new1].info.status == "FINISHED" and runs[new1].data.tags["distrepro.seed"] == "1"
    assert runs[killed.children[1]].info.status == "KILLED"
    assert _history(killed.uri, killed.children[1]) == [(120, 0.992)]
    own_steps = [step for step, _ in _history(killed.uri, killed.children[0])]  # a whole run's evaluations
    assert [step for step, _ in _history(killed.uri, new1)] == own_steps and 120 not in own_steps
    assert runs[new1].data.metrics["final/steps"] == 3
    assert runs[killed.parent].info.status == "FAILED"  # seed 2 is still to run

    # the rest: seeds 0 and 1 are skipped, seed 2 runs, the campaign is FINISHED
    assert main(["run", str(killed.config), "--no-progress", "--resume", killed.parent]) == 0
    err = capsys.readouterr().err
    assert f"seed 0: finished in run {killed.children[0]}, skipped" in err
    assert f"seed 1: finished in run {new1}, skipped" in err
    runs = killed.runs()
    assert runs[killed.parent].info.status == "FINISHED"
    finished = sorted(
        r.data.tags["distrepro.seed"]
        for r in runs.values()
        if r.info.status == "FINISHED" and r.data.tags.get("mlflow.parentRunId")
    )
    assert finished == ["0", "1", "2"]

    # and again: nothing to resume, one line, exit status 0, nothing trained
    done = run_cli(["run", str(killed.config), "--no-progress", "--resume", killed.parent], killed.uri, killed.cwd)
    assert done.rc == 0 and len(done.err_lines) == 1, done.err
    assert re.search(rf"campaign run {killed.parent} .*FINISHED: nothing to resume", done.err)
    # "nothing trained" is checked on the runs below (no wall-time bound: run_cli's hang guard ends a stuck one)
    assert killed.runs().keys() == runs.keys()


def test_a_changed_resolved_config_is_refused_before_anything_trains(
    killed: Killed, capsys: pytest.CaptureFixture[str]
) -> None:
    """The config file is the same, but the code resolved a cell differently (a method default changed)."""
    db = killed.uri.removeprefix("sqlite:///")
    with sqlite3.connect(db) as con:  # MLflow cannot change a logged param; the code's default "changed"
        con.execute(
            "UPDATE params SET value = '0.5' WHERE run_uuid = ? AND key = 'method_params.lr'", (killed.children[0],)
        )
    capsys.readouterr()
    assert main(["run", str(killed.config), "--no-progress", "--resume", killed.parent]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed 0" in err[0] and "method_params.lr: 0.5 (campaign) vs 0.05 (now)" in err[0], err
    runs = killed.runs()
    assert runs[killed.children[1]].info.status == "KILLED" and len(runs) == 3
    assert runs[killed.parent].info.status == "KILLED"
