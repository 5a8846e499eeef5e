"""The sensitivity sweep shows its progress (minutes for a paper such as ``chao``, silent before).

Shown as training is (:mod:`distrepro.orchestration.progress`): a bar per phase on a terminal, otherwise a line per
phase
and quarter of it, always on stderr; ``--no-progress`` drops the bar. The sweep runs on the two hand-built
runs of ``test_sensitivity``'s flip point, so nothing trains.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from sensitivity_setups import FLIP_PROFILE, _flip_setup

import distrepro.report.build as build
from distrepro.cli import main
from distrepro.orchestration.progress import PhaseProgress, progress_bars, wants_bars
from distrepro.sensitivity.runner import sensitivity

pytestmark = pytest.mark.smoke

SAMPLES = 16
#: the phases of a sweep over 2 runs, 1 uncertain figure (9 scan values + its central one) and 1 timing claim
PHASES = [
    ("rebuilding 2 runs", 2),
    ("re-timing 2 runs at central values", 2),
    (f"Latin hypercube of {SAMPLES} settings", SAMPLES + 1),
    ("one-at-a-time scans of 1 figure", 10),
    ("flip points and heat maps of 1 claim", 1),
]


class _Bars:
    """What a rich ``Progress`` is told: per task its description, total, the sum of advances, the last completed."""

    def __init__(self) -> None:
        self.tasks: list[dict[str, Any]] = []

    def add_task(self, description: str, total: int) -> int:
        self.tasks.append({"description": description, "total": total, "advanced": 0, "completed": 0})
        return len(self.tasks) - 1

    def update(self, task: int, advance: int = 0, completed: int | None = None) -> None:
        self.tasks[task]["advanced"] += advance
        if completed is not None:
            self.tasks[task]["completed"] = completed


@pytest.fixture
def flip(tmp_path: Path) -> tuple[Any, Any, Any]:
    path = tmp_path / "flip-sens.yaml"
    path.write_text(yaml.safe_dump(FLIP_PROFILE, sort_keys=False))
    return _flip_setup(str(path))


def test_a_terminal_gets_a_bar_per_phase_advanced_once_per_setting_judged(flip: tuple[Any, Any, Any]) -> None:
    info, rs, jobs = flip
    bars, lines = _Bars(), io.StringIO()
    result = sensitivity(info, rs, SAMPLES, lambda run_id, seed: jobs[run_id], progress=PhaseProgress("s", bars, lines))
    assert result is not None and result.claims
    assert [(t["description"], t["total"]) for t in bars.tasks] == [(f"s · {name}", n) for name, n in PHASES]
    for task in bars.tasks:  # every unit counted, none twice, and each bar ends full
        assert task["advanced"] == task["total"] == task["completed"], task
    assert lines.getvalue() == ""  # the bar is the display: no lines beside it


def test_without_a_terminal_each_phase_and_quarter_is_a_line(flip: tuple[Any, Any, Any]) -> None:
    info, rs, jobs = flip
    out = io.StringIO()
    sensitivity(info, rs, SAMPLES, lambda run_id, seed: jobs[run_id], progress=PhaseProgress("sens · flip", None, out))
    lines = out.getvalue().splitlines()
    assert all(re.match(r"\[sens · flip \d+:\d\d:\d\d\] ", line) for line in lines), lines
    said = [line.split("] ", 1)[1] for line in lines]
    lhs = f"Latin hypercube of {SAMPLES} settings"
    assert [s for s in said if s.startswith(lhs)] == [f"{lhs}: {d}/17" for d in (0, 5, 9, 13)]  # 17: with central
    assert [s for s in said if re.search(r": 0/\d+$", s)] == [f"{name}: 0/{n}" for name, n in PHASES]
    assert said[-1] == "done"


def test_the_shared_display_writes_to_stderr_and_only_a_terminal_gets_bars(monkeypatch: pytest.MonkeyPatch) -> None:
    with progress_bars(True) as bars:
        assert bars.console.stderr
    with progress_bars(False) as bars:
        assert bars is None
    assert wants_bars(False) is False and wants_bars(True) is True

    class _Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert wants_bars(None) is False  # a CI log or a redirected file: lines
    monkeypatch.setattr("sys.stderr", _Tty())
    assert wants_bars(None) is True


def test_build_report_shows_the_sweep_on_stderr(
    flip: tuple[Any, Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    info, rs, jobs = flip
    for run_id, job in jobs.items():  # what the sweep rebuilds each run from, as MLflow would give it
        resolved = {**job.config.model_dump(mode="json"), "seed": job.seed}
        rs.artifacts[(run_id, "config.resolved.yaml")] = yaml.safe_dump(resolved)
    monkeypatch.setattr(build, "find_paper", lambda paper, root=None: info)
    monkeypatch.setattr(build, "load_runs", lambda *args, **kwargs: rs)
    kwargs = {"out_dir": tmp_path / "report", "log_to_mlflow": False, "sensitivity": True, "sensitivity_samples": 8}
    build.build_report("flip", show_progress=False, **kwargs)  # --no-progress
    out, err = capsys.readouterr()
    assert "[sensitivity · flip " in err and err.rstrip().endswith("] done") and "sensitivity ·" not in out
    build.build_report("flip", show_progress=True, **kwargs)  # a terminal: the bar, on stderr too
    out, err = capsys.readouterr()
    assert "sensitivity · flip · Latin hypercube of 8 settings" in err and "] done" not in err
    assert "sensitivity ·" not in out


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["sensitivity", "flip"], None),
        (["sensitivity", "flip", "--no-progress"], False),
        (["report", "flip", "--sensitivity", "--no-progress"], False),
    ],
)
def test_the_commands_that_sweep_take_no_progress(
    argv: list[str], shown: bool | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def fake(paper: str, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise SystemExit(0)  # the arguments are what this test is about

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setattr(build, "build_report", fake)
    with pytest.raises(SystemExit):
        main(argv)
    assert seen["sensitivity"] is True and seen["show_progress"] is shown
