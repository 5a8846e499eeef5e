"""What ``distrepro reproduce`` leaves in MLflow: one umbrella run, arm runs with metrics and verdict tags,
seed runs named ``<arm>/s<seed>``, the report once; and ``--check`` exits 1 on a failed headline claim."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tiny_paper import PAPER

from distrepro.cli import main
from distrepro.reproduction.reproduce import reproduce
from distrepro.tracking.mlflow_client import make_client

#: the same claim, as the paper's own (headline) and out of reach: 10x less traffic
FAILING = PAPER.replace("claimed: 2.0", "claimed: 10.0").replace("evidence: derived", "evidence: verbatim")


def test_one_umbrella_run_holds_the_arms_and_the_report_once(paper_root: Path, mlflow_uri: str) -> None:
    result = reproduce("tinypaper", show_progress=False, root=paper_root)
    client = make_client(mlflow_uri)
    umbrella = client.get_run(result.run_id)
    assert umbrella.info.status == "FINISHED" and umbrella.data.tags["distrepro.reproduce"] == "proxy"
    assert umbrella.info.run_name == "reproduce tinypaper (proxy)"
    assert "mlflow.note.content" in umbrella.data.tags
    assert [a.path for a in client.list_artifacts(result.run_id, "report")], "the report is on the umbrella run"
    tally = umbrella.data.metrics
    assert {k: tally[k] for k in ("headline_pass", "headline_fail", "headline_inconclusive")} == {
        "headline_pass": 0.0,
        "headline_fail": 0.0,
        "headline_inconclusive": 0.0,
    }  # its one claim is derived
    for arm, campaign in result.campaigns.items():
        run = client.get_run(campaign.parent_run_id)
        assert run.data.tags["distrepro.reproduction"] == result.run_id
        assert "mlflow.parentRunId" not in run.data.tags  # a top-level row: its metric columns show at once
        assert client.list_artifacts(campaign.parent_run_id, "report") == []  # not once per arm
        assert run.data.tags["distrepro.verdicts"] == "fewer-bytes PASS"  # both arms take part in the claim
        assert "verdict.fewer-bytes" not in run.data.tags  # a derived claim: no column of its own
        metrics = run.data.metrics
        assert metrics["seeds_finished"] == 2
        seeds = [client.get_run(c.run_id).data.metrics["final/val_accuracy"] for c in campaign.cells]
        assert metrics["final/val_accuracy"] == pytest.approx(sum(seeds) / 2)
        assert metrics["final/val_accuracy/ci95_low"] <= metrics["final/val_accuracy"]
        assert metrics["final/val_accuracy/ci95_high"] >= metrics["final/val_accuracy"]
        assert metrics["acc_lo95"] <= metrics["acc_mean"] <= metrics["acc_hi95"]  # short names for the table
        assert metrics["acc_mean"] == float(f"{metrics['final/val_accuracy']:.4g}")  # rounded to what reads
        names = sorted(client.get_run(c.run_id).info.run_name for c in campaign.cells)
        assert names == [f"{arm}/s0", f"{arm}/s1"]
        child = client.get_run(campaign.cells[0].run_id)
        assert (
            "emu_ms/val_accuracy" in child.data.metrics
            and "emulated milliseconds" in child.data.tags["mlflow.note.content"]
        )
        assert child.data.tags["distrepro.torch_threads"].startswith("1 (config")


def _table_order(client, experiment_id: str) -> list[str]:
    """The table's rows in the order the printed link shows them: its shared view's filter and sort, as MLflow's UI
    asks them; a run with a parent is drawn under it, not as a row (distrepro.tracking.ui_view)."""
    import json

    from distrepro.tracking.ui_view import VIEW_TAG

    view = json.loads(client.get_experiment(experiment_id).tags[VIEW_TAG])
    order = f"{view['orderByKey']} {'ASC' if view['orderByAsc'] else 'DESC'}"
    runs = client.search_runs([experiment_id], view["searchFilter"], order_by=[order])
    return [r.info.run_id for r in runs if "mlflow.parentRunId" not in r.data.tags]


@pytest.mark.parametrize("jobs", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_each_arm_run_ends_with_its_last_cell_and_the_reproduction_follows_its_arms(
    paper_root: Path, mlflow_uri: str, jobs: int
) -> None:
    from distrepro.orchestration.executors.selection import ExecutorSpec

    executor = ExecutorSpec("local", jobs=jobs) if jobs > 1 else None
    result = reproduce("tinypaper", show_progress=False, root=paper_root, executor=executor)
    client = make_client(mlflow_uri)
    umbrella = client.get_run(result.run_id).info
    arms = []
    for campaign in result.campaigns.values():
        arm = client.get_run(campaign.parent_run_id).info
        cells = [client.get_run(c.run_id) for c in campaign.cells]
        assert all(c.data.tags["mlflow.parentRunId"] == arm.run_id for c in cells)  # drawn under their arm
        assert arm.end_time == max(c.info.end_time for c in cells)  # not when the process closed every arm
        assert arm.start_time == min(c.info.start_time for c in cells)  # not when the process opened every arm
        assert arm.end_time < umbrella.end_time  # the report came after the arm
        assert arm.start_time > umbrella.start_time  # so the newest-first table puts the umbrella after its arms
        arms.append((arm.start_time, min(c.info.end_time for c in cells), arm.run_id))
    (_, first_cell_end, first), (second_start, _, second) = sorted(arms)
    assert second_start >= first_cell_end  # each arm has as many seeds as there are slots: the second arm waits
    assert _table_order(client, result.experiment_id) == [second, first, result.run_id]


def test_a_later_reproduction_comes_before_the_earlier_one(paper_root: Path, mlflow_uri: str) -> None:
    runs = [reproduce("tinypaper", seeds=(0,), report=False, show_progress=False, root=paper_root)]
    runs.append(reproduce("tinypaper", seeds=(0,), show_progress=False, root=paper_root))
    client = make_client(mlflow_uri)
    experiment = client.get_experiment_by_name("distrepro/tinypaper").experiment_id
    order = _table_order(client, experiment)
    later = sorted((c.parent_run_id for c in runs[1].campaigns.values()), key=order.index)
    earlier = sorted((c.parent_run_id for c in runs[0].campaigns.values()), key=order.index)
    assert order == [*later, runs[1].run_id, *earlier, runs[0].run_id]  # each reproduction after its arms


def test_reproduce_says_its_size_and_estimated_time_before_training(
    paper_root: Path,
    mlflow_uri: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["reproduce", "tinypaper", "--seeds", "0", "--no-report", "--no-progress"]
    assert main(args) == 0
    first = capsys.readouterr().err
    assert "reproduce tinypaper: 2 arms, 2 runs; no time estimate yet" in first
    # each arm's campaign id as it starts, so an interrupted arm can be resumed by its id
    started = re.findall(
        r"^arm (\S+): campaign run ([0-9a-f]{32}) \(started, reproduction ([0-9a-f]{32})\)$", first, re.M
    )
    assert len(started) == 2 and len({umbrella for *_, umbrella in started}) == 1, first
    assert main(args) == 0
    second = capsys.readouterr().err.splitlines()
    assert second[0].startswith("reproduce tinypaper: 2 arms, 2 runs; estimated ")  # before any training line
    assert second[0].endswith("from earlier runs of the same configs")


def test_check_exits_1_only_when_a_headline_claim_fails(
    paper_root: Path,
    mlflow_uri: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["reproduce", "tinypaper", "--seeds", "0,1", "--no-progress", "--check"]
    assert main(args) == 0  # the derived claim passes
    out = capsys.readouterr()
    assert "this run: http://127.0.0.1:5000/#/experiments/" in out.out and "workflowType=machine_learning" in out.out
    (paper_root / "methods" / "tiny" / "paper.yaml").write_text(FAILING)
    assert main(args) == 1
    assert "--check: 1 headline claim(s) FAIL: fewer-bytes" in capsys.readouterr().err
    assert main(args[:-1]) == 0  # without --check a FAIL is a result, not an error
    assert main([*args, "--no-report"]) == 2


def test_version_and_list_show_what_users_type(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"distrepro {version('distrepro')}"
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    papers = out[out.index("papers") : out.index("methods:")]
    assert "cadp " in papers and "arms, by the scales each runs at:" in papers and "deepspeed_real*" in papers
