"""The emulator against published measurements (issue 23): ``benchmarks/validate_emulator.py`` runs in CI.

It predicts every point of ``benchmarks/data/emulator_points.yaml`` with the emulator's own code; this test runs it
and asserts the bounds it reports (median absolute error <= 15 % overall and <= 25 % within each source, every
published ordering of methods right), that it stays a quick prediction (under a minute, nothing logged), and that
the data file keeps its promises (at least 30 scored points from at least 3 sources, each citing where it is from).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("validate_emulator", REPO / "benchmarks" / "validate_emulator.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def report() -> tuple[ModuleType, object, float]:
    module = _module()
    start = time.process_time()  # CPU seconds: wall time on a shared machine measures the neighbours
    rep = module.run()
    return module, rep, time.process_time() - start


def test_the_data_cites_enough_independent_measurements(report) -> None:
    module, rep, _ = report
    summary = rep.summary()
    assert summary["overall"]["points"] >= 30
    assert summary["overall"]["sources"] >= 3
    data = module.read_yaml_mapping(module.DATA, "points")
    for point in data["points"]:
        assert point["source"] in data["sources"], point["id"]
        assert point["setting"].strip() and point["measured"] > 0, point["id"]


def test_the_reported_bounds_hold(report) -> None:
    module, rep, _ = report
    summary = rep.summary()
    assert summary["overall"]["median"] <= module.OVERALL_BOUND, module.render(rep)
    for source, stats in summary["per_source"].items():
        assert stats["median"] <= module.SOURCE_BOUND, (source, module.render(rep))
    assert all(o["right"] for o in summary["orderings"]), module.render(rep)
    assert all(summary["checks"].values())


def test_calibration_points_are_reproduced_and_not_scored(report) -> None:
    _, rep, _ = report
    calibrating = [o for o in rep.outcomes if o.point.get("role") == "calibrate"]
    assert calibrating and all(abs(o.error) < 1e-9 for o in calibrating)
    assert not set(map(id, calibrating)) & set(map(id, rep.scored()))


def test_it_is_a_prediction_under_a_minute(report) -> None:
    _, _, seconds = report
    assert seconds < 60  # CPU seconds of the whole validation: a prediction from tables, no training
