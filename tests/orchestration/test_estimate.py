"""The time a reproduction says before it starts: from earlier runs of the same configs, else, on a first run, from
the suite's recorded session of the paper at that scale, said as the estimate it is."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from clirun import write_config

from distrepro import metrics as M
from distrepro.config.run_config import RunConfig, load_config
from distrepro.orchestration.campaign import config_digest
from distrepro.orchestration.estimate import estimate_line
from distrepro.orchestration.heartbeat import about
from distrepro.orchestration.recorded_times import recorded_session


class FakeStore:
    """``search_runs`` as MLflow answers it: the finished runs whose config digest is asked for."""

    def __init__(self, walls: dict[str, list[float]]) -> None:
        self.walls = walls

    def search_runs(self, experiment_ids: list[str], filter_string: str, max_results: int) -> list[Any]:
        found = [w for digest, w in self.walls.items() if digest in filter_string]
        return [SimpleNamespace(data=SimpleNamespace(metrics={M.FINAL_WALL_S: v})) for w in found for v in w]


def _arms(tmp_path: Path) -> list[tuple[str, RunConfig]]:
    return [(n, load_config(write_config(tmp_path, name=n, seeds=[0, 1, 2]))) for n in ("first", "second")]


def test_a_first_run_is_estimated_from_the_suites_recorded_session(tmp_path: Path) -> None:
    arms = _arms(tmp_path)
    line = estimate_line("cadp", arms, FakeStore({}), "1", "proxy")
    recorded = recorded_session("cadp", "proxy")
    assert recorded is not None and recorded.runs == 30  # the session README.md's table times
    assert line == (
        f"reproduce cadp: 2 arms, 6 runs; {about(recorded.wall_for(6))} (training and report), an estimate from the "
        f"suite's recorded timings ({recorded.basis()}, {recorded.wall_for(1):.1f} s a run): these configs have not "
        "run in this tracking store yet, and load on this machine stretches it; a part of a session takes more than "
        "its share (start-up, the report)"
    )
    whole = [(f"arm{i}", load_config(write_config(tmp_path, name=f"arm{i}", seeds=[0, 1, 2, 3, 4]))) for i in range(6)]
    line = estimate_line("cadp", whole, FakeStore({}), "1", "proxy")  # the recorded session itself: its time
    assert f"; {about(recorded.wall_s)} (training and report), an estimate from the suite's recorded timings (" in line
    assert line.endswith(
        f"({recorded.basis()}): these configs have not run in this tracking store yet, and load on "
        "this machine stretches it"
    )
    assert "on an idle 2-core machine" in recorded.basis() and recorded.date in recorded.basis()
    mid = estimate_line("cadp", arms, FakeStore({}), None, "mid")  # another scale: its own recorded session
    assert (mid_session := recorded_session("cadp", "mid")) is not None and mid_session.basis() in mid


def test_arms_run_here_before_are_estimated_from_those_runs_the_others_from_the_record(tmp_path: Path) -> None:
    arms = _arms(tmp_path)
    store = FakeStore({config_digest(arms[0][1]): [10.0, 20.0, 30.0]})  # median 20 s, times 3 seeds
    line = estimate_line("cadp", arms, store, "1", "proxy")
    recorded = recorded_session("cadp", "proxy")
    assert recorded is not None
    assert "1.0 min of training for the arms run here before, from earlier runs of the same configs, and " in line
    assert f"{about(recorded.wall_for(3))} for those never run here (second) from the suite's recorded timings" in line
    both = FakeStore({config_digest(cfg): [20.0] for _, cfg in arms})
    assert estimate_line("cadp", arms, both, "1", "proxy").endswith(
        "estimated 2.0 min of training on this machine, from earlier runs of the same configs"
    )


def test_a_paper_the_suite_never_timed_gets_no_number(tmp_path: Path) -> None:
    line = estimate_line("tinypaper", _arms(tmp_path), FakeStore({}), None, "proxy")
    assert line.endswith("6 runs; no time estimate yet: these configs have not run in this tracking store")
