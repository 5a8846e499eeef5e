"""Exploratory runs never enter a confirmatory verdict: a reproduction on seeds outside its scale's pre-registration
record, started fresh or resumed, is judged in a report of its own (``reports/<paper>/exploratory``), and the
registered report's files stay byte for byte as they were; the registered report judges only the record's seeds."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

import distrepro.orchestration.campaign as campaign_module
from distrepro.claims.preregistration import preregister
from distrepro.cli import main
from distrepro.report.build import build_report

REAL_RUN_CELL = campaign_module._run_cell


def _files(folder: Path) -> dict[str, bytes]:
    """Every file of the registered report (its exploratory folder left out), by relative path."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "exploratory" not in p.relative_to(folder).parts
    }


def _verdict(folder: Path) -> dict[str, Any]:
    data = json.loads((folder / "claims_verdict.json").read_text())
    (v,) = [v for v in data["verdicts"] if v["claim_id"] == "fewer-bytes"]
    return {**v, "exploratory": data.get("exploratory")}


def _check_views_split(uri: str) -> None:
    """The exploratory reproduction's runs (its umbrella, arms and seeds) are the exploratory view's; the registered
    one's are the confirmatory view's (distrepro.tracking.ui_view)."""
    from distrepro.tracking.mlflow_client import make_client
    from distrepro.tracking.ui_view import CONFIRMATORY_FILTER, EXPLORATORY_FILTER

    client = make_client(uri)
    exp = client.get_experiment_by_name("distrepro/tinypaper").experiment_id
    explored = sorted(r.info.run_name for r in client.search_runs([exp], EXPLORATORY_FILTER))
    assert explored == ["local", "local/s7", "reproduce tinypaper (proxy)", "sync", "sync/s7"]
    registered = sorted(r.info.run_name for r in client.search_runs([exp], CONFIRMATORY_FILTER))
    assert [n for n in registered if "/s" in n] == ["local/s0", "local/s1", "sync/s0", "sync/s1"]
    assert len(registered) == 7  # and the umbrella, the two arms


def test_seeds_outside_the_record_report_apart_fresh_and_resumed(
    paper_root: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    preregister("tinypaper", "proxy", seeds=[0, 1], root=paper_root)
    assert main(["reproduce", "tinypaper", "--no-progress"]) == 0  # the registered test: the record's seeds 0, 1
    registered = Path("reports/tinypaper")
    before = _files(registered)
    assert before and _verdict(registered)["n_seeds"] == 2
    capsys.readouterr()

    # fresh: one seed outside the record
    assert main(["reproduce", "tinypaper", "--seeds", "7", "--no-progress"]) == 0
    said = capsys.readouterr()
    assert "exploratory runs, judged in reports/tinypaper/exploratory/" in said.err
    assert "viewStateShareKey=distrepro-exploratory" in said.out  # its link opens the runs table's exploratory view
    _check_views_split(mlflow_uri)
    assert _files(registered) == before  # byte for byte
    exploratory = registered / "exploratory"
    md = (exploratory / "report.md").read_text()
    assert "exploratory reproduction report" in md.splitlines()[0] and "**Exploratory**" in md
    seen = _verdict(exploratory)
    assert seen["exploratory"] is True and set(next(iter(seen["per_seed"].values()))) == {"7"}

    # resumed: interrupted as its second cell starts, then continued with the command its line prints
    calls: list[int] = []

    def run_cell(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return REAL_RUN_CELL(*args, **kwargs)

    monkeypatch.setattr(campaign_module, "_run_cell", run_cell)
    assert main(["reproduce", "tinypaper", "--seeds", "8", "--no-progress"]) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]
    hint = re.search(r"continue it with: distrepro (.+)$", line)
    assert hint is not None, line
    monkeypatch.setattr(campaign_module, "_run_cell", REAL_RUN_CELL)
    assert main(shlex.split(hint.group(1))) == 0
    assert "exploratory runs" in capsys.readouterr().err
    assert _files(registered) == before  # still untouched
    assert set(next(iter(_verdict(exploratory)["per_seed"].values()))) == {"7", "8"}

    # rebuilt now, the registered report still judges only the record's seeds (never n = 4 with 7 and 8)
    rebuilt = build_report("tinypaper", out_dir=Path("again").resolve(), root=paper_root, log_to_mlflow=False)
    (v,) = [v for v in rebuilt.verdicts if v.claim_id == "fewer-bytes"]
    assert v.n_seeds == 2 and set(next(iter(v.per_seed.values()))) == {0, 1}
    assert "left out of this report" in Path("again/report.md").read_text()
