"""The suite's hang guards stretch with the machine's load (``tests/_support/hang_guard.py``): a busy machine
slows a correct test without failing it, and a real hang still ends."""

from __future__ import annotations

import os

import hang_guard
import pytest

pytestmark = pytest.mark.smoke


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)


@pytest.mark.parametrize(
    ("load", "factor"),
    [(0.3, 1.0), (2.0, 1.0), (20.0, 10.0), (1000.0, hang_guard.MAX_FACTOR)],
)
def test_a_guard_stretches_by_the_load_per_core(
    two_cores: None, monkeypatch: pytest.MonkeyPatch, load: float, factor: float
) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert hang_guard.load_factor() == factor
    assert hang_guard.hang_guard(120) == 120 * factor


def test_without_a_load_average_the_guard_is_the_idle_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert hang_guard.hang_guard(240) == 240


def test_the_per_test_limit_is_stretched_before_the_test_runs(request: pytest.FixtureRequest) -> None:
    """conftest prepends the ini's 300 s times the load then as this test's closest ``timeout`` marker."""
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None and marker.args[0] >= float(request.config.getini("timeout"))


@pytest.mark.timeout(7)
def test_a_tests_own_limit_is_stretched_too(request: pytest.FixtureRequest) -> None:
    marks = [m.args[0] for m in request.node.iter_markers("timeout")]
    assert marks[0] >= 7 and 7 in marks[1:]
