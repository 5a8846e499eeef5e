"""The first screen names the command that decides headline claims this session could not (QSR's are all at paper
scale), with the plan's cluster, time and FLOPs; and acid's first screen counts its headline claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from distrepro.claims.papers import find_paper
from distrepro.claims.verdicts import evaluate_claims
from distrepro.report.deciding_runs import deciding_runs
from distrepro.report.headline import first_screen


def _no_runs(paper: str) -> tuple[Any, list[Any]]:
    info = find_paper(paper)
    runs = pd.DataFrame(columns=["run_id", "parent_run_id", "method", "profile", "seed", "status"])
    return info, evaluate_claims(info.spec, runs, None, paper)


def _fake_plan(calls: list[tuple[Path, list[str]]]):
    def plan(path: Path, overrides: list[str]) -> dict[str, Any]:
        calls.append((path, overrides))
        return {
            "config": {"profile": "qsr-16gpu", "seeds": [0, 1, 2]},
            "time": {"total_s": 7200.0, "compute": [{"count": 16, "device": "rtx3090"}]},
            "training": {"seeds": 3, "flops_all_seeds": 1e19},
        }

    return plan


@pytest.mark.smoke
def test_qsr_first_screen_says_which_command_decides_its_paper_scale_claims() -> None:
    info, verdicts = _no_runs("qsr")
    calls: list[tuple[Path, list[str]]] = []
    text = deciding_runs(info, verdicts, plan=_fake_plan(calls))
    assert "`distrepro reproduce qsr --scale paper` decides them" in text
    assert "Q1, Q2, Q3, Q4, Q5" in text and "are claims at paper scale" in text
    assert all(path.name.endswith(".paper.yaml") for path, _ in calls)  # each arm's paper-scale config, planned
    assert all("scale=paper" in sets and any(o.startswith("method=") for o in sets) for _, sets in calls)
    n = len(calls)
    assert f"{n} arms × 3 seeds on the emulated cluster `qsr-16gpu` (16 × rtx3090)" in text
    assert f"about {n * 3 * 2:,.0f} h on that hardware" in text  # 2 h per seed from the plan, every arm and seed
    assert f"{n * 1e19:.2g} FLOP".replace("e+", "e") in text
    assert "`qsr-64gpu` need the same arms with `--set profile=…`" in text  # Q2 and Q4 are on the 64-GPU profile


def test_a_proxy_session_that_decides_its_headline_says_nothing_more() -> None:
    info, verdicts = _no_runs("acid")
    assert deciding_runs(info, verdicts, plan=_fake_plan([])) == ""  # acid's headline claims are at proxy scale


def test_acid_first_screen_counts_its_headline_claims() -> None:
    info, verdicts = _no_runs("acid")
    screen = first_screen(info.spec, verdicts)
    assert "Of the paper's 0" not in screen and "0 hold, 0 do not hold, 0 cannot be decided" not in screen
    heads = [line for line in screen.splitlines() if line.startswith("- **")]
    assert len(heads) >= 2 and screen.startswith(f"**Of the paper's {len(heads)} headline claims")


@pytest.mark.slow
def test_qsr_paper_scale_plan_is_real() -> None:
    """The real planner on one arm: the cluster and hours come from the configs, not from this module."""
    info, verdicts = _no_runs("qsr")
    only_q1 = [v for v in verdicts if v.claim_id == "Q1"]
    text = deciding_runs(info, only_q1)
    assert "`qsr-16gpu` (16 × rtx3090)" in text and " h on that hardware" in text
