"""Issue 13: the clock has noise (so timing CIs have width) and seeds are common random numbers across arms.

Unit checks on the cost model and on built jobs: nothing is trained.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import torch
import yaml
from profile_files import expect_error, minimal_profile, write

from distrepro.config.run_config import validate_config
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.engine.run_setup import make_stream
from distrepro.hardware.profiles import load_profile
from distrepro.job.resolve import build_job
from distrepro.timing.timemodel import CommCostModel, ComputeModel, sigma_of_cv

pytestmark = pytest.mark.smoke


# ---------------------------------------------------------------------- clock noise


def test_cadp_profile_declares_clock_noise_with_a_source() -> None:
    noise = load_profile("cadp-ijcai25").noise
    assert noise is not None and (noise.compute_cv, noise.link_cv) == (0.03, 0.05)
    assert "[E]" in noise.source and "tensorflow/benchmarks#285" in noise.source
    assert load_profile("cadp-ijcai25", variant="geo").noise == noise  # a network variant keeps the noise


def test_profile_compute_cv_is_a_mean_one_lognormal_per_step() -> None:
    model = ComputeModel(load_profile("cadp-ijcai25"), "resnet18_in100_224", 1e9, ("p", "m", "cadp-ijcai25", 0))
    factors = [model.noise_factor(rank, step) for rank in (0, 5) for step in range(3000)]
    assert statistics.fmean(factors) == pytest.approx(1.0, abs=0.003)
    assert statistics.stdev(factors) == pytest.approx(0.03, rel=0.06)
    again = ComputeModel(load_profile("cadp-ijcai25"), "resnet18_in100_224", 1e9, ("p", "m", "cadp-ijcai25", 0))
    assert again.noise_factor(5, 17) == model.noise_factor(5, 17)  # derived, not drawn


def test_a_devices_own_jitter_wins_over_the_profile_default(tmp_path: Path) -> None:
    data = minimal_profile()
    data["noise"] = {"compute_cv": 0.2, "source": "[E] test"}
    data["nodes"][0]["devices"][0]["jitter"] = {"kind": "lognormal", "sigma": 0.01}
    for node in data["nodes"]:
        node["devices"][0]["effective_flops_per_s"] = 1e12
    model = ComputeModel(load_profile(write(tmp_path, data, "noisy")), None, 1e9, ("x",))
    own = statistics.stdev(model.noise_factor(0, s) for s in range(2000))  # node a: its own 1%
    default = statistics.stdev(model.noise_factor(2, s) for s in range(2000))  # node b: the profile's 20%
    assert own == pytest.approx(0.01, rel=0.1) and default == pytest.approx(0.2, rel=0.1)
    assert sigma_of_cv(0.2) == pytest.approx(0.19804, rel=1e-4)


def _gpu_speed_model(tmp_path: Path, gpu_cv: float, count: int = 2, seed: int = 0, **device: object) -> ComputeModel:
    data = minimal_profile() | {"schema_version": 2}
    data["noise"] = {"gpu_cv": gpu_cv, "source": "[M] test"}
    for node in data["nodes"]:
        node["devices"][0].update({"effective_flops_per_s": 1e12, "count": count, **device})
    return ComputeModel(load_profile(write(tmp_path, data, f"gpus{gpu_cv}")), None, 1e9, ("x", seed))


def test_each_gpus_own_speed_is_one_draw_per_rank_and_run_kept_at_every_step(tmp_path: Path) -> None:
    """``noise.gpu_cv``: a rank's factor is the same at every step (its GPU does not change), differs from rank to
    rank and from seed to seed, has mean 1 and the declared spread over many GPUs; without it nothing moves."""
    model = _gpu_speed_model(tmp_path, 0.05, count=500)
    steps = {model.step_seconds(3, 100, step, 0.0) for step in range(50)}
    assert len(steps) == 1 and steps != {model.step_seconds(4, 100, 0, 0.0)}
    factors = [model.gpu_speed_factor(rank) for rank in range(1000)]
    assert statistics.fmean(factors) == pytest.approx(1.0, abs=0.006)
    assert statistics.stdev(factors) == pytest.approx(0.05, rel=0.1)
    other_seed = _gpu_speed_model(tmp_path, 0.05, count=500, seed=1)
    assert other_seed.gpu_speed_factor(3) != model.gpu_speed_factor(3)
    assert _gpu_speed_model(tmp_path, 0.05, count=500).gpu_speed_factor(3) == model.gpu_speed_factor(3)  # derived
    quiet = _gpu_speed_model(tmp_path, 0.0)
    assert quiet.gpu_speed_factor(0) == 1.0 and quiet.step_seconds(0, 100, 0, 0.0) == pytest.approx(100 * 1e9 / 1e12)


def test_a_gpus_own_speed_scales_its_gpu_work_not_the_host_floor(tmp_path: Path) -> None:
    """A step whose host floor binds stays at the floor whatever the GPU's draw; a GPU-bound one moves with it."""
    floor_ms = {"w": 50.0}
    model = _gpu_speed_model(tmp_path, 0.3, count=4, step_floor_ms=floor_ms, throughput_samples_per_s={"w": 1000.0})
    model = ComputeModel(model.profile, "w", 1e9, ("x", 0))
    slow = max(range(8), key=model.gpu_speed_factor)
    fast = min(range(8), key=model.gpu_speed_factor)
    assert model.gpu_speed_factor(fast) < 1.0 < model.gpu_speed_factor(slow)
    assert model.step_seconds(fast, 10, 0, 0.0) == pytest.approx(0.050)  # 10 ms of GPU work under a 50 ms floor
    assert model.step_seconds(slow, 1000, 0, 0.0) == pytest.approx(1.0 * model.gpu_speed_factor(slow))


def test_link_noise_varies_each_collective_around_the_alpha_beta_cost() -> None:
    profile = load_profile("cadp-ijcai25")
    quiet = CommCostModel(profile.model_copy(update={"noise": None}))
    nominal = quiet.ring_all_reduce(range(8), 44.9e6)
    assert quiet.ring_all_reduce(range(8), 44.9e6) == nominal  # no noise: the formula itself
    noisy = CommCostModel(profile, seed_parts=("p", "m", "cadp-ijcai25", 0, "link"))
    draws = [noisy.ring_all_reduce(range(8), 44.9e6) / nominal for _ in range(3000)]
    assert statistics.fmean(draws) == pytest.approx(1.0, abs=0.005)
    assert statistics.stdev(draws) == pytest.approx(0.05, rel=0.06)
    replay = CommCostModel(profile, seed_parts=("p", "m", "cadp-ijcai25", 0, "link"))
    assert [replay.ring_all_reduce(range(8), 44.9e6) / nominal for _ in range(5)] == draws[:5]
    assert noisy.control(range(8)) == quiet.control(range(8))  # a few bytes of control traffic: no noise


def test_both_ends_of_a_message_draw_the_same_link_noise() -> None:
    """The distributed engine charges a pairwise exchange on both ranks; they must agree."""
    profile = load_profile("cadp-ijcai25")
    a, b = (CommCostModel(profile, seed_parts=("s", "link")) for _ in range(2))
    assert [a.exchange(0, 5, 1e6) for _ in range(4)] == [b.exchange(5, 0, 1e6) for _ in range(4)]


def test_noise_source_needs_a_provenance_tag(tmp_path: Path) -> None:
    data = minimal_profile()
    data["noise"] = {"compute_cv": 0.03, "source": "trust me"}
    expect_error(write(tmp_path, data), "noise.source", "provenance tag")
    data["noise"] = {"link_cv": -0.1, "source": "[E] x"}
    expect_error(write(tmp_path, data), "noise.link_cv", "greater than or equal to 0")


# ---------------------------------------------------------------------- common random numbers


TINY = {
    "profile": "hetero-2fast-2slow",
    "paper": "crn",
    "dataset": {"name": "synthetic", "params": {"train_size": 128, "test_size": 32, "image_size": 8}},
    "model": {"name": "small_cnn", "params": {"hidden": 16}},
    "batch_size": 8,
    "budget": {"steps": 2},
    "eval": {"times": 1},
    "torch_threads": 1,
}


def _job(method: str, seed: int = 0, **params: object):
    return build_job(validate_config({**TINY, "method": method, "method_params": params}), seed)


def _params(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def test_arms_with_the_same_seed_index_share_the_initial_model_and_first_batches() -> None:
    ddp, zero = _job("ar_sgd", weighting="equal"), _job("deepspeed_zero")
    assert torch.equal(_params(ddp.make_model()), _params(zero.make_model()))
    for rank in range(ddp.world_size):
        a = make_stream(ddp, ddp.allocate(0), 0, rank).next_batch()
        b = make_stream(zero, zero.allocate(0), 0, rank).next_batch()
        assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    other_seed = _job("ar_sgd", seed=1, weighting="equal")
    assert not torch.equal(_params(ddp.make_model()), _params(other_seed.make_model()))


def test_the_method_keeps_its_own_randomness_and_clock() -> None:
    ddp, zero = _job("ar_sgd", weighting="equal"), _job("deepspeed_zero")
    assert ddp.seed_parts == zero.seed_parts == ("crn", "hetero-2fast-2slow", 0)
    assert ddp.method_seed_parts != zero.method_seed_parts  # gossip peers, clock jitter: the method's own
    assert ddp.compute.seed_parts != zero.compute.seed_parts and ddp.cost.seed_parts != zero.cost.seed_parts


def test_arms_of_one_seed_run_on_the_same_draw_of_gpus(tmp_path: Path) -> None:
    """Each GPU's own speed is the cluster's, not the method's: two arms of a seed index charge the same factor per
    rank (a paper runs its methods on one cluster), another seed index draws another cluster."""
    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "hardware_profiles/homogeneous-4.yaml").read_text())
    data["noise"] = {"gpu_cv": 0.05, "source": "[M] test"}
    profile = str(write(tmp_path, data, "homogeneous-4-gpus"))
    ddp = build_job(
        validate_config({**TINY, "profile": profile, "method": "ar_sgd", "method_params": {"weighting": "equal"}}), 0
    )
    zero = build_job(validate_config({**TINY, "profile": profile, "method": "deepspeed_zero"}), 0)
    other = build_job(
        validate_config({**TINY, "profile": profile, "method": "ar_sgd", "method_params": {"weighting": "equal"}}), 1
    )
    ranks = range(ddp.world_size)
    assert [ddp.compute.gpu_speed_factor(r) for r in ranks] == [zero.compute.gpu_speed_factor(r) for r in ranks]
    assert len({ddp.compute.gpu_speed_factor(r) for r in ranks}) == ddp.world_size  # each GPU its own
    assert [other.compute.gpu_speed_factor(r) for r in ranks] != [ddp.compute.gpu_speed_factor(r) for r in ranks]
    assert ddp.compute.seed_parts != zero.compute.seed_parts  # the per-step jitter stays the method's own


def test_same_init_and_data_make_ddp_and_modelled_zero2_agree_without_sharing_seeds() -> None:
    """Before issue 13 the test of this equality had to copy one arm's seeds into the other."""
    a, b = InProcessEngine().run(_job("ar_sgd", weighting="equal")), InProcessEngine().run(_job("deepspeed_zero"))
    assert torch.allclose(_params(a.models[0]), _params(b.models[0]), atol=1e-5)


def test_configs_of_both_reproductions_run_five_seeds() -> None:
    """Five paired seeds, except C-ADP's mid scale: ten, since five cannot resolve A-C5's 1-point margin."""
    root = Path(__file__).resolve().parents[2] / "methods"
    for path in [*root.glob("cadp/configs/*.yaml"), *root.glob("chao_alloc/configs/1m-*.yaml")]:
        if "dist" not in path.name:
            ten = path.parent.parent.name == "cadp" and path.name.endswith(".mid.yaml")
            assert yaml.safe_load(path.read_text())["seeds"] == list(range(10 if ten else 5)), path


def test_a_zero_byte_call_draws_no_link_noise() -> None:
    """The in-process engine asks each collective's latency part as a zero-byte charge: that must neither be
    noisy nor use up the factor of the next real call (both engines and the analytical replay draw alike)."""
    profile = load_profile("cadp-ijcai25")
    quiet = CommCostModel(profile.model_copy(update={"noise": None}))
    parts = ("p", "m", "cadp-ijcai25", 0, "link")
    probed, fresh = CommCostModel(profile, seed_parts=parts), CommCostModel(profile, seed_parts=parts)
    assert probed.ring_all_reduce(range(8), 0) == quiet.ring_all_reduce(range(8), 0)
    assert probed.broadcast(range(8), 0, 0) == quiet.broadcast(range(8), 0, 0)
    assert probed.ring_all_reduce(range(8), 44.9e6) == fresh.ring_all_reduce(range(8), 44.9e6)
    assert probed.ring_all_reduce(range(8), 44.9e6) != quiet.ring_all_reduce(range(8), 44.9e6)


def test_charges_outside_the_run_use_a_noise_free_copy_and_leave_the_stream_alone() -> None:
    """Throttle calibration and plans price an all-reduce that is not part of the run: on the noise-free copy,
    at the nominal cost, without consuming the next draw of the run's link noise."""
    profile = load_profile("cadp-ijcai25")
    nominal = CommCostModel(profile.model_copy(update={"noise": None})).ring_all_reduce(range(8), 44.9e6)
    parts = ("p", "m", "cadp-ijcai25", 0, "link")
    run, fresh = CommCostModel(profile, seed_parts=parts), CommCostModel(profile, seed_parts=parts)
    assert run.noise_free().ring_all_reduce(range(8), 44.9e6) == nominal
    assert run.noisy and not run.noise_free().noisy
    assert run.ring_all_reduce(range(8), 44.9e6) == fresh.ring_all_reduce(range(8), 44.9e6)  # first draw intact
