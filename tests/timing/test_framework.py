"""The framework's costs (issue 33): each charged, with the right sign and scaling."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from statistics import NormalDist
from types import SimpleNamespace

import pytest
import yaml

from distrepro.hardware.workloads import load_workloads
from distrepro.timing import framework as fw


def test_expected_max_grows_with_p_and_is_one_without_jitter() -> None:
    values = [fw.expected_max_factor(p, 0.02) for p in (1, 2, 8, 64, 512)]
    assert values[0] == 1.0 and all(a < b for a, b in itertools.pairwise(values))
    # E[max of 2 normals] = 1/sqrt(pi) sigma; for a small sigma the lognormal is nearly normal
    assert values[1] - 1 == pytest.approx(0.02 / math.sqrt(math.pi), rel=0.02)
    assert fw.expected_max_factor(64, 0.0) == 1.0


def test_a_gpus_own_speed_and_the_steps_jitter_combine_as_independent_factors() -> None:
    """SYNC_CV is the CV of the product of two independent mean-1 factors (the GPU's own speed, the step's jitter):
    above either alone, below their sum; 4 IQR / median = 8 % of a normal (the published figure) gives GPU_CV; and a
    step waiting for the slowest of 8 pays more with the GPUs' spread than with the jitter alone."""
    assert pytest.approx((1 + fw.STEP_CV**2) * (1 + fw.GPU_CV**2) - 1) == fw.SYNC_CV**2
    assert max(fw.STEP_CV, fw.GPU_CV) < fw.SYNC_CV < fw.STEP_CV + fw.GPU_CV
    iqr_sigmas = 2 * NormalDist().inv_cdf(0.75)
    assert pytest.approx(0.08 / (4 * iqr_sigmas), abs=5e-5) == fw.GPU_CV
    low, high = fw.RANGES["GPU_CV"]
    assert low <= fw.GPU_CV <= high == pytest.approx(0.22 / (4 * iqr_sigmas), abs=5e-4)
    assert fw.expected_max_factor(8, fw.SYNC_CV) > fw.expected_max_factor(8) > 1.0


def test_jitter_averages_over_micro_batches_run_without_a_sync_the_gpus_own_speed_does_not() -> None:
    """``sync_cv``: one micro-batch between syncs is SYNC_CV exactly; more lower the CV towards GPU_CV (the GPU's own
    speed is the same at every micro-batch), never below it; without a GPU spread the jitter falls as 1/sqrt(k)."""
    assert fw.sync_cv(1) == fw.SYNC_CV
    cvs = [fw.sync_cv(k) for k in (1, 2, 16, 256)]
    assert cvs == sorted(cvs, reverse=True) and len(set(cvs)) == 4
    assert fw.GPU_CV < cvs[-1] < fw.GPU_CV * 1.01
    assert fw.sync_cv(16, gpu_cv=0.0) == pytest.approx(fw.STEP_CV / 4)
    with pytest.raises(ValueError, match="micro_batches"):
        fw.sync_cv(0)


def test_reducer_cost_is_charged_for_a_gpu_with_layers_and_scales_with_bytes_over_bandwidth() -> None:
    table = load_workloads()["transformer_base_wmt14_195tok"].layers
    t4 = fw.bucketed_step_overhead_s(SimpleNamespace(name="t4", kind="gpu"), table)
    a100 = fw.bucketed_step_overhead_s(SimpleNamespace(name="a100", kind="gpu"), table)
    copies = fw.BUCKET_PASSES * 4 * table.params
    assert t4 - a100 == pytest.approx(copies / 320e9 - copies / 1555e9)
    assert t4 > a100 > 0
    assert fw.bucketed_step_overhead_s(SimpleNamespace(name="t4", kind="gpu"), None) == 0.0
    assert fw.bucketed_step_overhead_s(SimpleNamespace(name="epyc", kind="cpu"), table) == 0.0


def test_ddp_step_overlaps_buckets_and_contention_lengthens_backward() -> None:
    """compute 1 s, backward 2/3; buckets of 0.1 s ready at half and all of backward."""
    base = fw.ddp_step_s(1.0, 2 / 3, [(0.5, 0.1), (1.0, 0.1)], contention=0.0)
    assert base == pytest.approx(1.1)  # the last bucket after backward
    # the first bucket runs beside 0.1 s of backward, which ends 0.1·0.1/1.1 late and launches the last bucket then
    late = 0.1 * 0.1 / 1.1
    assert fw.ddp_step_s(1.0, 2 / 3, [(0.5, 0.1), (1.0, 0.1)], contention=0.1) == pytest.approx(1.1 + late)
    # compute-bound: the one bucket beside 0.1 s of backward, which ends 9 ms (or 23 ms at 0.3) late
    assert fw.ddp_step_s(1.0, 2 / 3, [(0.25, 0.1)], contention=0.1) == pytest.approx(1.0 + late)
    assert fw.ddp_step_s(1.0, 2 / 3, [(0.25, 0.1)], contention=0.3) == pytest.approx(1.0 + 0.1 * 0.3 / 1.3)
    # a bucket that outlasts backward: the last 0.5 s of backward's work takes 0.55 s beside it
    assert fw.ddp_step_s(1.0, 2 / 3, [(0.25, 0.9)], contention=0.1) == pytest.approx(max(1.05, 0.5 + 0.9))
    assert fw.ddp_step_s(1.0, 2 / 3, [(0.5, 0.1)], overhead_s=0.05, contention=0.0) == pytest.approx(1.05)


def test_framework_figures_resolve_from_the_profile_block_over_the_defaults() -> None:
    from distrepro.hardware.profiles import load_profile

    nccl = fw.costs(load_profile("a100-ib-8"))
    assert (nccl.backend, nccl.contention, nccl.launch_s, nccl.bucket_passes) == ("nccl", fw.CONTENTION, 5e-6, 4.0)
    assert fw.costs(load_profile("acid-a100-16")).contention == 0.0  # pinned off: gossip is charged none either
    mixed = fw.costs(load_profile("cadp-ijcai25"))  # CPUs beside the GPUs: torch.distributed runs gloo
    assert (mixed.backend, mixed.contention) == ("gloo", 0.0)
    table = load_workloads()["transformer_base_wmt14_195tok"].layers
    gpu = SimpleNamespace(name="a100", kind="gpu")
    more = fw.FrameworkCosts(bucket_passes=6.0)  # apex's passes, or a comm hook dividing in a pass of its own
    assert fw.bucketed_step_overhead_s(gpu, table, more) > fw.bucketed_step_overhead_s(gpu, table)


def test_the_reducer_costs_what_its_code_runs_per_tensor_per_bucket_and_per_byte() -> None:
    """PyTorch's reducer: two kernels per gradient tensor (the copy in with the division fused, the copy back), none
    per bucket, 4 bytes per gradient byte; apex's: three kernels per bucket (flatten, divide, unflatten), 6 bytes.
    The engines' per-tensor figure is PyTorch's two kernels."""
    torch_ddp, apex = fw.REDUCERS["torch"], fw.REDUCERS["apex"]
    assert (torch_ddp.kernels_per_tensor, torch_ddp.kernels_per_bucket, torch_ddp.passes) == (2.0, 0.0, 4.0)
    assert (apex.kernels_per_tensor, apex.kernels_per_bucket, apex.passes) == (0.0, 3.0, 6.0)
    assert torch_ddp.kernels_per_tensor * fw.KERNEL_S == pytest.approx(fw.LAUNCH_S)
    assert torch_ddp.passes == fw.BUCKET_PASSES
    grad, bandwidth = 421e6, 1555e9  # Transformer-big's FP16 gradients on an A100
    t = fw.reducer_seconds(torch_ddp, 185, 17, grad, bandwidth)
    assert t == pytest.approx(185 * 2 * fw.KERNEL_S + 4 * grad / bandwidth)
    a = fw.reducer_seconds(apex, 185, 17, grad, bandwidth)
    assert a == pytest.approx(17 * 3 * fw.KERNEL_S + 6 * grad / bandwidth)
    # a function of the tensors (PyTorch) and of the buckets (apex), each alone
    assert (
        fw.reducer_seconds(torch_ddp, 370, 17, grad, bandwidth)
        > t
        == fw.reducer_seconds(torch_ddp, 185, 34, grad, bandwidth)
    )
    assert fw.reducer_seconds(apex, 185, 34, grad, bandwidth) > a == fw.reducer_seconds(apex, 370, 17, grad, bandwidth)
    assert fw.reducer_seconds(torch_ddp, 185, 17, grad, None) == pytest.approx(185 * 2 * fw.KERNEL_S)


def test_the_engine_realises_the_expected_slowest_of_p(tmp_path: Path) -> None:
    """A synchronous method on p = 8 GPUs with per-step jitter (CV 10 %) and a near-free network: the in-process engine
    waits for the slowest draw each step, so 200 steps average to the nominal step x E[max of p], the term the
    analytical predictions charge (within 2 %: the sample mean of 200 maxima)."""
    from sensitivity_setups import WORKLOAD, _config

    from distrepro.config.run_config import validate_config
    from distrepro.engine.inprocess import InProcessEngine
    from distrepro.job.resolve import build_job

    p = 8
    device = {"name": "gpu", "kind": "gpu", "count": p, "memory_gib": 8, "source": "[E] test"}
    link = {"latency_us": 0, "bandwidth_gbytes_per_s": 1.0e6, "source": "[E] test"}
    profile = {
        "schema_version": 2,
        "name": "jittery",
        "description": "p GPUs, 100 samples/s, CV 10 % per step, a near-free network",
        "collective_algorithm": "ring",
        "nodes": [{"name": "box", "devices": [device | {"throughput_samples_per_s": {WORKLOAD: 100.0}}]}],
        "network": {"intra_node": link, "inter_node": link},
        "noise": {"compute_cv": 0.1, "source": "[E] test"},
    }
    path = tmp_path / "jittery.yaml"
    path.write_text(yaml.safe_dump(profile), encoding="utf-8")
    config = _config(str(path), "ar_sgd", {"weighting": "equal", "overlap": False}, batch_size=4)
    config |= {"budget": {"steps": 200}, "eval": {"every_steps": 200}}
    result = InProcessEngine().run(build_job(validate_config(config), 0))
    step = result.emulated_s / 200
    assert step == pytest.approx(0.04 * fw.expected_max_factor(p, 0.1), rel=0.02)
    assert step > 0.04 * 1.03  # not the mean: the maximum


def test_loop_extras_price_syncs_and_the_host_bound_tail_they_expose() -> None:
    """A loop with 1 + 3 per rank syncs and one op per gradient tensor after them, on 8 GPUs: 25 syncs at 12.6 + 2.5
    µs; 100 ops at the host's 12.6 µs against their 0.25 ms of launches and 2 x 100 MB at 1 TB/s on the GPU, which a
    1-GPU step pays too; plus the all-gather's own 0.1 ms. None of it on one GPU."""
    extras = fw.LoopExtras(1, 3, 1, 16384, "test")
    syncs = 25 * (12.6e-6 + 2.5e-6)
    tail = 100 * 12.6e-6 - (100 * 2.5e-6 + 2 * 100e6 / 1e12)
    got = fw.loop_extras_seconds(extras, 8, 100, 100e6, 1e12, all_gather_s=1e-4)
    assert got == pytest.approx(syncs + tail + 1e-4)
    assert got == pytest.approx(1.1875e-3 + 1e-4)  # the same, written out: 0.3775 + 0.81 + 0.1 ms
    assert fw.loop_extras_seconds(extras, 1, 100, 100e6, 1e12, all_gather_s=1e-4) == 0.0
    # a GPU-bound tail (1 GB of gradients) costs nothing beyond what one GPU pays; the syncs grow with the ranks
    assert fw.loop_extras_seconds(extras, 8, 100, 1e9, 1e12) == pytest.approx(syncs)
    assert fw.loop_extras_seconds(extras, 16, 100, 1e9, 1e12) == pytest.approx(49 * (12.6e-6 + 2.5e-6))
    assert fw.loop_extras_seconds(fw.LoopExtras(0, 0, 0, 0, "none"), 16, 100, 1e8, 1e12) == 0.0
