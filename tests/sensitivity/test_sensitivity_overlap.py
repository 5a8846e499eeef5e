"""The analytical re-timing of DDP-style overlap (distrepro/api/overlap.py) equals what the engine charges.

Arms that all-reduce gradient buckets while backward runs (``overlap: true``, the default of
``ar_sgd`` and ``chao_alloc``) are re-timed by :mod:`distrepro.sensitivity.analytic` from the buckets'
ready times and their FIFO lane. Checked three ways: against the in-process engine at several hardware
settings (speeds, the CPU's NIC, the backward share), against a step time worked out by hand on two
equal GPUs, and learnt iteration patterns against probing every batch size.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from sensitivity_setups import TINY_PROFILE, WORKLOAD, _config

from distrepro.api.overlap import bucket_plan, emulated_buckets
from distrepro.config.run_config import validate_config
from distrepro.engine.inprocess import InProcessEngine
from distrepro.hardware.profiles import load_profile
from distrepro.job.resolve import Job, build_job
from distrepro.sensitivity.analytic import simulate
from distrepro.sensitivity.probe import Prober
from distrepro.sensitivity.space import apply_to_profile
from distrepro.timing.timemodel import CommCostModel, ComputeModel

ARMS = {
    "ar_sgd_equal": ("ar_sgd", {"weighting": "equal"}),
    "ar_sgd_samples": ("ar_sgd", {"weighting": "samples"}),
    "chao_adaptive": ("chao_alloc", {"mode": "adaptive", "global_batch": 34}),
}

#: (gpu speed factor, cpu speed factor, CPU NIC GB/s, backward share, contention): the central setting, a fast
#: network (compute-bound: all-reduce hidden), a slow one (communication-bound), a short backward (little to hide),
#: and NCCL's contention of the buckets' all-reduces with backward (the mixed cluster runs gloo: none by default)
SETTINGS = [
    (1.0, 1.0, 0.1, None, None),
    (2.0, 0.5, 1.0, 0.8, None),
    (0.5, 2.0, 0.02, 0.3, None),
    (2.0, 0.5, 1.0, 0.8, 0.3),
    (1.0, 1.0, 0.1, None, 0.3),
]


def _profile(
    folder: Path, gpu: float, cpu: float, nic: float, backward: float | None, contention: float | None = None
) -> str:
    prof = apply_to_profile(
        load_profile(_write(folder, TINY_PROFILE)),
        {"gpu.speed": gpu, "cpu.speed": cpu, "cpu.nic.bandwidth_gbytes_per_s": nic},
    )
    data = prof.model_dump(mode="json", exclude_none=True)
    if backward is not None:
        data["schema_version"] = 2
        data["backward"] = {"fraction": backward, "source": "[E] test"}
    if contention is not None:
        data["framework"] = {"backend": "nccl", "contention": contention, "source": "[E] test"}
    data["name"] = f"tiny-{gpu}-{cpu}-{nic}-{backward}-{contention}"
    return _write(folder, data)


def _write(folder: Path, data: dict[str, Any]) -> str:
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _job(profile: str, method: str, params: dict[str, Any], **extra: Any) -> Job:
    return build_job(validate_config(_config(profile, method, params, **extra)), 1)


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "-".join(map(str, s)))
@pytest.mark.parametrize("arm", list(ARMS))
def test_analytical_overlap_time_equals_the_engines(arm: str, setting: tuple, tmp_path: Path) -> None:
    method, params = ARMS[arm]
    profile = _profile(tmp_path, *setting)
    job = _job(profile, method, {**params, "overlap": True})
    layers = job.workload.layers if job.workload is not None else None
    assert len(bucket_plan(job.make_model(), job.bytes_scale, layers)) >= 2  # several buckets, or nothing overlaps
    result = InProcessEngine().run(job)
    timing = simulate(job, Prober(job))
    assert timing.emulated_s == pytest.approx(result.emulated_s, rel=1e-12)
    assert timing.samples == result.final.samples and timing.steps == result.final.step
    for rec in result.evals:
        assert timing.at_step(rec.step) == pytest.approx(rec.emulated_s, rel=1e-12)
    serial = _job(profile, method, {**params, "overlap": False})
    assert timing.emulated_s < simulate(serial, Prober(serial)).emulated_s  # overlap hides some communication


@pytest.mark.parametrize("arm", ["ar_sgd_equal", "chao_adaptive"])
def test_contention_lengthens_the_overlapped_step_in_the_engine_and_the_replay(arm: str, tmp_path: Path) -> None:
    """The same run with NCCL's contention at 0 and at 0.3 of the overlapped time: the engine charges more time at
    0.3, and the replay (what the sensitivity sweep re-times) charges exactly the engine's at both."""
    method, params = ARMS[arm]
    times = []
    for contention in (0.0, 0.3):
        folder = tmp_path / str(contention)
        folder.mkdir()
        data = yaml.safe_load(Path(_profile(folder, 2.0, 0.5, 1.0, 0.8, contention)).read_text())
        data["name"] = "tiny-contention"  # one name: the seeds (jitter, stragglers) are the same in both runs
        job = _job(_write(folder, data), method, {**params, "overlap": True})
        result = InProcessEngine().run(job)
        assert simulate(job, Prober(job)).emulated_s == pytest.approx(result.emulated_s, rel=1e-12)
        times.append(result.emulated_s)
    assert times[1] > times[0]


FLIP_LIKE = {
    "schema_version": 2,
    "name": "two-gpus",
    "description": "two equal GPUs on two machines, links without latency",
    "collective_algorithm": "ring",  # the hand computation below is the flat model's (no NCCL base latency)
    "nodes": [
        {"name": f"m{i}", "devices": [{"name": "gpu", "kind": "gpu", "count": 1, "memory_gib": 8,
                                        "throughput_samples_per_s": {WORKLOAD: 100.0}, "source": "[S] test"}]}
        for i in range(2)
    ],
    "network": {
        "intra_node": {"latency_us": 0, "bandwidth_gbytes_per_s": 8, "source": "[S] test"},
        "inter_node": {"latency_us": 0, "bandwidth_gbytes_per_s": 0.5, "source": "[S] test"},
    },
    "backward": {"fraction": 0.6, "source": "[S] test"},
}  # fmt: skip


def test_overlap_step_time_matches_a_hand_computation(tmp_path: Path) -> None:
    """Two ranks, batch 8 at 100 samples/s: compute 0.08 s, backward 0.048 s of it. Bucket i is ready at
    0.032 + 0.048·f_i (f_i: the share of the emulated model's backward done when its last layer is, from the
    workload's layer table), its ring all-reduce on two ranks costs its bytes/B and starts when it is ready and the
    previous bucket is done; the step ends with the last bucket (or compute). The device ("gpu") has no datasheet
    memory bandwidth, so no reducer cost is added."""
    job = _job(_write(tmp_path, FLIP_LIKE), "ar_sgd", {"weighting": "equal", "overlap": True}, batch_size=8,
               budget={"samples": 16})  # fmt: skip
    assert job.workload is not None and job.workload.layers is not None
    plan = emulated_buckets(job.workload.layers)
    table_bytes = sum(b.nbytes for b in plan)
    compute, backward = 8 / 100.0, 8 / 100.0 * 0.6
    end = 0.0
    for (
        bucket
    ) in plan:  # the emulated model's buckets, each at its own bytes (the workload's total), whatever the proxy
        ready = compute - backward + backward * bucket.ready
        nbytes = bucket.nbytes / table_bytes * job.workload.param_bytes
        end = max(ready, end) + nbytes / 0.5e9
    # then the buffer broadcast: the small CNN has no BatchNorm buffers, so nothing; one iteration on 16 samples
    step = max(compute, end)
    assert len(plan) >= 2
    assert simulate(job, Prober(job)).emulated_s == pytest.approx(step, rel=1e-9)


@pytest.mark.parametrize("weighting", ["equal", "samples"])
def test_buckets_the_proxy_has_no_tensor_in_are_re_timed_as_the_engine_charges_them(
    tmp_path: Path, weighting: str
) -> None:
    """Transformer-base's 7 buckets over the small CNN's 8 tensors, most of whose bytes sit in one: some buckets hold
    no proxy tensor and are launched and charged as themselves all the same (issue 44); the replay the sensitivity
    sweep runs charges exactly what the engine charges."""
    workload = "transformer_base_wmt14_195tok"
    data = yaml.safe_load(yaml.safe_dump(FLIP_LIKE))
    data["name"] = "two-gpus-transformer"
    for node in data["nodes"]:
        node["devices"][0]["throughput_samples_per_s"] = {workload: 100.0}
    job = _job(_write(tmp_path, data), "ar_sgd", {"weighting": weighting, "overlap": True}, batch_size=8,
               budget={"samples": 32}, emulated_workload=workload)  # fmt: skip
    assert job.workload is not None
    plan = bucket_plan(job.make_model(), job.bytes_scale, job.workload.layers)
    assert len(plan) == 7 and any(not b.params for b in plan)
    result = InProcessEngine().run(job)
    assert simulate(job, Prober(job)).emulated_s == pytest.approx(result.emulated_s, rel=1e-12)


def test_learnt_overlap_patterns_give_the_times_of_probing_every_size(tmp_path: Path) -> None:
    """Chao's adaptive split changes the batch sizes every epoch: the "fb" pattern learnt from two probes
    predicts the bucket events of every other size."""
    job = _job(_write(tmp_path, TINY_PROFILE), "chao_alloc", {"mode": "adaptive", "global_batch": 34})
    learning, probing = Prober(job), Prober(job, learn=False)
    prof = job.profile
    for gpu, cpu in [(0.5, 2.0), (2.0, 0.5), (1.3, 0.7), (0.8, 1.9), (1.1, 1.2), (0.6, 0.9)]:
        p = apply_to_profile(prof, {"gpu.speed": gpu, "cpu.speed": cpu})
        c = job.compute
        j = replace(job, profile=p, cost=CommCostModel(p),
                    compute=ComputeModel(p, c.workload_name, c.flops_per_sample, c.seed_parts))  # fmt: skip
        assert simulate(j, learning).emulated_s == simulate(j, probing).emulated_s
    assert learning.predicted > 0
