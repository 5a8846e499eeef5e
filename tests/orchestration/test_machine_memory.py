"""Replicas that cannot fit in this machine's memory are refused before a run exists, with the estimate in the one
line (:mod:`distrepro.orchestration.machine_memory`); the machine's memory is read from the kernel's limits."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pytest

from distrepro.config.run_config import validate_config
from distrepro.errors import ConfigError
from distrepro.job.resolve import build_job
from distrepro.orchestration import machine_memory
from distrepro.orchestration.campaign import run_campaign
from distrepro.orchestration.machine_memory import available_bytes, check_memory, job_bytes

R152: dict[str, object] = {
    "name": "r152",
    "method": "ar_sgd",
    "profile": "homogeneous-4",
    "model": {"name": "resnet152"},
    "dataset": {"name": "synthetic", "params": {"train_size": 64, "test_size": 16, "image_size": 16}},
    "batch_size": 8,
    "budget": {"steps": 1},
    "eval": {"times": 1},
    "torch_threads": 1,
}


def test_four_resnet152_replicas_are_refused_under_3_gib_with_the_estimate() -> None:
    """Four ResNet-152 replicas under a 4 GB limit died with a raw allocator error mid-run; the estimate (4 x 4 x
    ~230 MiB of parameters and their state) is known the moment the job is built (the model counted on the meta
    device: nothing allocated here)."""
    job = build_job(validate_config(R152), 0, "r152.yaml")
    need, how = job_bytes(job)
    assert 3.2 * 2**30 < need < 4 * 2**30 and how.startswith("4 replica(s) x 4 x "), how
    with pytest.raises(ConfigError) as info:
        check_memory(job, "r152.yaml", available=3 * 2**30)
    line = str(info.value)
    assert "\n" not in line and line.startswith("r152.yaml: field 'model.name': resnet152: this run needs about 3.")
    assert "but this machine has 3.00 GiB available" in line, line
    check_memory(job, "r152.yaml", available=64 * 2**30)  # fits: nothing said


def test_a_campaign_too_big_for_the_memory_leaves_no_run(
    tmp_path: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(machine_memory, "available_bytes", lambda: 2**30)
    with pytest.raises(ConfigError, match=r"this machine has 1\.00 GiB available"):
        run_campaign(validate_config(R152), "r152.yaml", show_progress=False, tracking_uri=mlflow_uri)
    client = mlflow.MlflowClient(mlflow_uri)
    assert [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])] == []


def test_the_available_memory_is_the_least_of_the_kernels_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine_memory, "_meminfo_available", lambda: 10 * 2**30)
    monkeypatch.setattr(machine_memory, "_cgroup_left", lambda: 4 * 2**30)
    monkeypatch.setattr(machine_memory, "_address_space_left", lambda: None)
    assert available_bytes() == 4 * 2**30
    monkeypatch.setattr(machine_memory, "_cgroup_left", lambda: None)
    assert available_bytes() == 10 * 2**30
    assert machine_memory.worker_cap(available=3 * 2**30) == 5  # 0.6 GiB a worker
