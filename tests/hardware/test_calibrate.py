"""The step-time fit behind ``distrepro calibrate`` and the catalogue: the engine's own form ``t0 + b/peak``."""

from __future__ import annotations

import pytest

from distrepro.hardware.calibrate import (
    describe_fit,
    device_entry,
    fit_step_curve,
    merge_entry,
    single_device_profile,
)
from distrepro.hardware.profiles import HardwareProfile


def test_exact_points_give_back_the_fixed_cost_and_the_peak() -> None:
    points = [(b, 0.020 + b / 500.0) for b in (1, 2, 8, 64)]
    fit = fit_step_curve(points)
    assert fit.t0_s == pytest.approx(0.020, rel=1e-9)
    assert fit.peak_samples_per_s == pytest.approx(500.0, rel=1e-9)
    assert fit.worst_residual < 1e-9


def test_relative_weighting_keeps_small_batches_honest() -> None:
    """A 5 % error at a small batch counts as much as 5 % at a large one (unweighted fits ignore the small one)."""
    points = [(1, 0.0105), (256, 0.520)]  # 10 ms + b/500 would be 12 ms and 522 ms
    fit = fit_step_curve(points)
    assert all(abs(r) < 1e-9 for r in fit.residuals)  # two points: the line goes through both


def test_a_negative_intercept_is_refitted_through_the_origin() -> None:
    fit = fit_step_curve([(1, 0.001), (2, 0.004), (4, 0.008)])  # a straight line would cross below zero
    assert fit.t0_s == 0.0
    assert fit.peak_samples_per_s > 0


def test_one_batch_size_is_a_lower_bound_and_says_so() -> None:
    fit = fit_step_curve([(32, 0.1), (32, 0.12)])
    assert fit.t0_s == 0.0
    assert "one batch size only" in describe_fit(fit)


def test_a_poor_fit_is_flagged() -> None:
    fit = fit_step_curve([(1, 0.01), (2, 0.05), (4, 0.012), (8, 0.2)])
    assert fit.worst_residual > 0.10
    assert "treat as approximate" in describe_fit(fit)


@pytest.mark.parametrize("bad", [[], [(0, 1.0)], [(1, -1.0)], [(1, float("nan"))]])
def test_bad_points_are_refused(bad: list[tuple[float, float]]) -> None:
    with pytest.raises(ValueError):
        fit_step_curve(bad)


def test_the_entry_loads_as_a_profile_and_charges_what_was_fitted() -> None:
    from distrepro.timing.compute import ComputeModel

    fit = fit_step_curve([(1, 0.03), (4, 0.06)])
    entry = device_entry("resnet18_cifar_32", fit, "cpu-test", "cpu", 8.0, "host test, torch x")
    profile = HardwareProfile.model_validate(single_device_profile("calibrated-test", entry))
    assert profile.device(0).source.startswith("[M]")
    model = ComputeModel(profile, "resnet18_cifar_32", 1e9)
    assert model.nominal_step_seconds(0, 1) == pytest.approx(0.03, rel=1e-3)
    assert model.nominal_step_seconds(0, 4) == pytest.approx(0.06, rel=1e-3)


def test_merging_a_second_workload_keeps_the_first_and_replaces_its_own_source() -> None:
    first = device_entry("a", fit_step_curve([(1, 0.01), (2, 0.015)]), "d", "cpu", 1, "run 1")
    second = device_entry("b", fit_step_curve([(1, 0.02), (2, 0.03)]), "d", "cpu", 1, "run 2")
    again = device_entry("a", fit_step_curve([(1, 0.02), (2, 0.025)]), "d", "cpu", 1, "run 3")
    merged = merge_entry(merge_entry(first, second), again)
    assert set(merged["throughput_samples_per_s"]) == {"a", "b"}
    assert "run 1" not in merged["source"] and "run 2" in merged["source"] and "run 3" in merged["source"]
