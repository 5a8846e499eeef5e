"""tools/rerun_verdicts.py: the re-run every frozen-input change needs, built from the committed records."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from benchmark_module import script_module

REPO = Path(__file__).resolve().parents[1]


def _tool():
    return script_module("tools", "rerun_verdicts")


def _record(root: Path, plugin: str, paper: str, scale: str, n: int, looks: list[int] | None) -> None:
    folder = root / "methods" / plugin / "preregistration"
    folder.mkdir(parents=True, exist_ok=True)
    sequential = {"design": "pocock", "looks": looks} if looks else {"design": "fixed", "n": n}
    body = {"paper": paper, "scale": scale, "n": n, "seeds": list(range(500, 500 + n)), "sequential": sequential}
    (folder / f"{scale}.yaml").write_text(yaml.safe_dump(body))


@pytest.mark.smoke
def test_register_keeps_each_records_design_on_fresh_seeds(tmp_path: Path) -> None:
    tool = _tool()
    _record(tmp_path, "chao_alloc", "chao", "mid", 5, None)
    _record(tmp_path, "cadp", "cadp", "mid", 10, [5, 10])
    _record(tmp_path, "cadp", "cadp", "proxy", 5, None)
    records = tool.registrations(tmp_path)
    assert [(r.paper, r.scale) for r in records] == [("cadp", "proxy"), ("cadp", "mid"), ("chao", "mid")]
    commands = [" ".join(c) for c in tool.register_commands(records, 510)]
    assert commands == [
        "distrepro preregister cadp --scale proxy --seeds 510-514 --replace",
        "distrepro preregister cadp --scale mid --seeds 510-519 --replace --looks 5,10",
        "distrepro preregister chao --scale mid --seeds 510-514 --replace",  # the paper id, not the plugin folder
    ]
    with pytest.raises(SystemExit, match="start at 100"):
        tool.register_commands(records, 42)


@pytest.mark.smoke
def test_run_covers_every_committed_record_then_writes_and_checks_results() -> None:
    tool = _tool()
    records = tool.registrations()
    committed = sorted(REPO.glob("methods/*/preregistration/*.yaml"))
    assert len(records) == len(committed) >= 10  # five papers, proxy and mid
    commands = tool.run_commands(records)
    reproduced = {(c[2], c[4]) for c in commands if c[1] == "reproduce"}
    assert reproduced == {(r.paper, r.scale) for r in records}
    assert commands[-2:] == [["distrepro", "results"], ["distrepro", "results", "--check"]]
    assert tool.log_name(3, commands[0]) == f"03-reproduce-{records[0].paper}-{records[0].scale}.log"


@pytest.mark.smoke
def test_dry_run_prints_and_runs_nothing(tmp_path: Path, capsys) -> None:
    tool = _tool()
    assert tool.main(["run", "--store", str(tmp_path / "store"), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("distrepro reproduce ") and out[-1] == "distrepro results --check"
    assert not (tmp_path / "store").exists()


@pytest.mark.smoke
def test_papers_and_scales_narrow_the_steps_and_an_unknown_name_is_refused() -> None:
    tool = _tool()
    records = tool.selected(tool.registrations(), "chao,qsr", "proxy")
    assert [(r.paper, r.scale) for r in records] == [("chao", "proxy"), ("qsr", "proxy")]
    with pytest.raises(SystemExit, match="no record for chaos; known: acid"):
        tool.selected(tool.registrations(), "chaos", None)


@pytest.mark.smoke
def test_chains_run_every_reproduction_then_results_in_order_and_stop_at_a_failure(tmp_path: Path, monkeypatch) -> None:
    tool = _tool()
    cmds = tool.run_commands(tool.registrations())
    ran: list[int] = []

    def fake(index: int, cmd: list[str], env: dict, logs: Path | None, fail: int | None = None) -> int:
        assert env["MLFLOW_TRACKING_URI"] == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
        ran.append(index)
        return 3 if index == fail else 0

    monkeypatch.setattr(tool, "_run_one", fake)
    assert tool._execute(cmds, tmp_path, None, chains=2) == 0
    n = len(cmds)
    assert sorted(ran[: n - 2]) == list(range(1, n - 1)) and ran[-2:] == [n - 1, n]  # results after every run
    ran.clear()
    monkeypatch.setattr(tool, "_run_one", lambda i, c, e, g: fake(i, c, e, g, fail=1))
    assert tool._execute(cmds, tmp_path, None, chains=2) == 3
    assert n - 1 not in ran and n not in ran  # no RESULTS.md from a store a reproduction failed to fill
