"""A plan's ``expected`` figure: the slowest of p at every wait, for the noise the profile declares
(``distrepro/orchestration/plan_noise.py``). The central figure stays noise free; the expectation is checked
against a simulation of what the engines draw."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distrepro.config.overrides import parse_override
from distrepro.config.run_config import load_config
from distrepro.job.resolve import build_job
from distrepro.orchestration.plan import build_plan, render
from distrepro.orchestration.plan_noise import cv_of_sigma, declared_sigmas, wait_factor
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


@pytest.mark.parametrize(
    ("config", "profile"),
    [
        (ROOT / "methods/decentdp/configs/allreduce_jitter.yaml", "a40-25gbe-16-jitter"),  # batches' spread, GPUs
        (ROOT / "methods/acid/configs/gossip-n16.yaml", None),  # the profile's compute_cv
    ],
)
def test_the_plan_reads_the_sigmas_the_engines_draw(config: Path, profile: str | None) -> None:
    """The plan re-reads the profile's noise (the engines' model is frozen code): it must find the sigmas the
    engines' compute model draws with, the batches' spread included (the jitter profile declares one)."""
    overrides = [parse_override(f"profile={profile}")] if profile else []
    job = build_job(load_config(config, overrides), 0)
    step_sigma, gpu_sigma = declared_sigmas(job)
    assert step_sigma == pytest.approx(max(job.compute._sigma)) and step_sigma > 0
    gpus = {job.compute.gpu_speed_factor(r) for r in range(job.world_size)}
    assert gpu_sigma == pytest.approx(sigma_of_cv(job.profile.noise.gpu_cv))
    assert (len(gpus) > 1) == (gpu_sigma > 0)  # the engines draw each GPU's speed exactly where the plan reads one
