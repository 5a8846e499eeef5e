"""Timed warm-up (profiling) before the first allocation: emulated-clock and paced real speeds, and
C-ADP allocating from them on both engines."""

from __future__ import annotations

import pytest
import torch
from quiet import quiet_job

from distrepro.config.run_config import validate_config
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.engine.multiprocess.launch import DistEngine
from distrepro.engine.warmup import paced_elapsed, timed_speed, warmup_batch
from distrepro.job.resolve import build_job
from distrepro.timing.warmup_profile import emulated_speed

DECLARED_CADP = (1600.0,) * 4 + (12.0, 12.0, 39.0, 22.0)  # cadp-ijcai25, resnet18_in100_224


def _cfg(profile: str = "chao-1m-1to2", **over) -> object:
    base = {
        "method": "cadp",
        "method_params": {"micro_batch": 16, "round_epochs": 1.0},
        "profile": profile,
        "dataset": {"params": {"num_classes": 10, "train_size": 256, "test_size": 64, "image_size": 8}},
        "batch_size": 16,
        "budget": {"epochs": 2},
        "eval": {"times": 1},
        "torch_threads": 1,
    }
    base.update(over)
    return validate_config(base)


@pytest.mark.smoke
def test_emulated_speed_is_the_clock_charge_with_its_noise() -> None:
    quiet = quiet_job(build_job(_cfg("cadp-ijcai25", batch_size="profile", emulated_workload="resnet18_in100_224"), 0))
    assert [emulated_speed(quiet, r, 3) for r in range(8)] == pytest.approx(DECLARED_CADP, rel=1e-9)
    noisy = build_job(_cfg(), 0)  # chao-1m-1to2: 5% lognormal jitter
    declared = [noisy.compute.declared_samples_per_s(r) for r in range(2)]
    speeds = [emulated_speed(noisy, r, 3) for r in range(2)]
    assert speeds == pytest.approx(declared, rel=0.15)
    assert speeds != pytest.approx(declared, rel=1e-6)  # the jitter shows
    assert speeds == [emulated_speed(build_job(_cfg(), 0), r, 3) for r in range(2)]  # derived, not drawn


@pytest.mark.smoke
def test_warmup_batch_has_the_configured_size_and_leaves_training_data_alone() -> None:
    job = build_job(_cfg(batch_size=[8, 16]), 0)
    a, b = warmup_batch(job, 0), warmup_batch(job, 1)
    assert (len(a), len(b)) == (8, 16)
    assert torch.equal(a.inputs, warmup_batch(job, 0).inputs)


class _FakeHost:
    """A clock that only moves when a pass runs or the pacer sleeps: pacing checked without load noise."""

    def __init__(self, pass_s: float) -> None:
        self.now, self.pass_s, self.slept = 0.0, pass_s, []

    def clock(self) -> float:
        return self.now

    def run_pass(self) -> None:
        self.now += self.pass_s

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


@pytest.mark.smoke
@pytest.mark.parametrize(("pass_s", "expected"), [(0.01, 3 * 0.08), (0.05, 3 * 0.08), (0.1, 3 * 0.1)])
def test_paced_passes_last_d_times_their_charge_unless_the_host_is_slower(pass_s: float, expected: float) -> None:
    host = _FakeHost(pass_s)
    elapsed = paced_elapsed(host.run_pass, [0.04] * 3, 2.0, clock=host.clock, sleep=host.sleep)
    assert elapsed == pytest.approx(expected, rel=1e-12)  # D x charge = 80 ms per pass, or the pass itself
    assert len(host.slept) == (3 if pass_s < 0.08 else 0)


def test_paced_timed_speed_never_exceeds_the_emulated_speed() -> None:
    """A paced pass lasts at least D x its charge, whatever the host's load, so the profiled speed
    is at most the clock's; how close it comes depends on the load, so only the bound is asserted
    on real passes (recovery is the fake-clock test above). Clock noise is left out: a step charged
    below its mean would allow a faster pass."""
    job = quiet_job(build_job(_cfg("cadp-ijcai25", batch_size="profile", emulated_workload="resnet18_in100_224"), 0))
    rank = 0  # an RTX 3090: 64 samples at 1600/s = 40 ms charged per pass
    raw = timed_speed(job, rank, 2)  # unpaced: the host's own speed on the proxy model
    assert raw > 0
    paced = timed_speed(job, rank, 3, dilation=3.0 * DECLARED_CADP[rank] / raw)
    assert 0 < paced <= DECLARED_CADP[rank] * (1 + 1e-9)


@pytest.mark.smoke
def test_cadp_allocates_from_profiled_speeds_in_process() -> None:
    profiled = InProcessEngine().run(build_job(_cfg(), 0)).allocations[0][1]
    declared = InProcessEngine().run(build_job(_cfg(method_params={"speeds": "declared"}), 0)).allocations[0][1]
    job = build_job(_cfg(), 0)
    assert profiled.speeds == tuple(emulated_speed(job, r, 20) for r in range(2))
    assert declared.speeds == tuple(job.compute.declared_samples_per_s(r) for r in range(2))
    assert profiled.shares != declared.shares


@pytest.mark.distributed
def test_cadp_profiles_the_same_on_the_distributed_engine() -> None:
    a = InProcessEngine().run(build_job(_cfg(), 0))
    b = DistEngine().run_cell(build_job(_cfg(engine="dist", dist={"timeout_s": 60}), 0), None)
    assert b.allocations[0][1].speeds == a.allocations[0][1].speeds
    assert b.allocations[0][1].shares == a.allocations[0][1].shares
    flat = [torch.cat([p.detach().reshape(-1) for p in r.models[0].parameters()]) for r in (a, b)]
    assert torch.allclose(flat[0], flat[1], atol=1e-5)


@pytest.mark.distributed
@pytest.mark.slow
def test_throttled_cadp_profiles_real_paced_passes() -> None:
    job = build_job(_cfg(), 0)
    declared = [job.compute.declared_samples_per_s(r) for r in range(2)]
    # a dilation that leaves every pass 3x the host's real time (the calibrated one is noisy under load)
    dilation = 3.0 * max(d / timed_speed(job, r, 2) for r, d in enumerate(declared))
    cfg = _cfg(engine="dist", throttle={"enabled": True, "dilation": dilation}, budget={"steps": 1})
    job = build_job(cfg, 0)
    result = DistEngine().run_cell(job, None)
    speeds = result.allocations[0][1].speeds
    assert speeds is not None and speeds != tuple(emulated_speed(job, r, 20) for r in range(2))  # timed, not charged
    assert list(speeds) == pytest.approx(declared, rel=0.25)
