"""A plan's ``expected`` figure: the slowest of p at every wait, for the noise the profile declares
(``distrepro/orchestration/plan_noise.py``). The central figure stays noise free; the expectation is checked
against a simulation of what the engines draw."""

from __future__ import annotations

import numpy as np
import pytest

from distrepro.orchestration.plan import build_plan, render
from distrepro.orchestration.plan_noise import cv_of_sigma, wait_factor
from distrepro.plugins.roots import repo_root
from distrepro.timing.compute import sigma_of_cv

ROOT = repo_root()
PARALLEL, QSR = ROOT / "methods/qsr/configs/parallel.paper.yaml", ROOT / "methods/qsr/configs/qsr.paper.yaml"


def test_cv_of_sigma_inverts_sigma_of_cv() -> None:
    for cv in (0.0, 0.0148, 0.02, 0.3):
        assert cv_of_sigma(sigma_of_cv(cv)) == pytest.approx(cv, abs=1e-12)


@pytest.mark.parametrize("steps_between", [1, 4])
def test_the_wait_factor_is_the_mean_slowest_of_p_the_engines_would_draw(steps_between: int) -> None:
    """Each worker: its GPU's lognormal speed times the mean of its steps' lognormal jitter between two waits; the
    wait pays the largest of p. Simulated, the mean of that largest agrees with the analytical factor."""
    p, step_sigma, gpu_sigma, trials = 16, 0.05, 0.0148, 40_000
    rng = np.random.default_rng(0)
    gpu = np.exp(gpu_sigma * rng.standard_normal((trials, p)) - gpu_sigma**2 / 2)
    steps = np.exp(step_sigma * rng.standard_normal((trials, p, steps_between)) - step_sigma**2 / 2)
    simulated = float((gpu * steps.mean(axis=2)).max(axis=1).mean())
    assert wait_factor(p, steps_between, step_sigma, gpu_sigma) == pytest.approx(simulated, abs=2e-3)


def test_rounds_between_waits_pay_less_than_a_wait_every_step_but_the_gpus_own_speed_stays() -> None:
    every_step = wait_factor(64, 1, 0.02, 0.0148)
    rounds = wait_factor(64, 16, 0.02, 0.0148)
    gpus_alone = wait_factor(64, 1, 0.0, 0.0148)
    assert every_step > rounds > gpus_alone > 1.0
    assert wait_factor(64, 1000, 0.02, 0.0148) == pytest.approx(gpus_alone, abs=1e-3)
    assert wait_factor(1, 1, 0.02, 0.0148) == 1.0 and wait_factor(8, 1, 0.0, 0.0) == 1.0


def test_a_plan_on_a_noisy_profile_adds_the_expected_slowest_of_p_beside_its_central_figure() -> None:
    sets = ["profile=qsr-64gpu", "batch_size=64"]
    parallel, qsr = (build_plan(c, sets)["time"] for c in (PARALLEL, QSR))
    for time in (parallel, qsr):
        expected = time["expected"]
        assert expected["compute_factor"] > 1.0 and expected["total_s"] > time["total_s"]
    # Parallel AdamW waits every step, QSR once a round: it pays less of the slowest of 64
    assert parallel["expected"]["compute_factor"] > qsr["expected"]["compute_factor"]
    text = render(build_plan(PARALLEL, sets))
    assert "expected: ×1.0" in text and "(the slowest of p, noise as declared)" in text and " h in all" in text


def test_a_plan_on_a_profile_without_noise_has_only_its_central_figure() -> None:
    time = build_plan(ROOT / "configs/quickstart.yaml")["time"]
    assert "expected" not in time and isinstance(time["total_s"], float)
