"""AR-SGD on the GPUs alone (``devices: gpu``): the fair, trivial DDP baseline of a CPU+GPU cluster (issue 13).

The GPU-only arm on a mixed profile must cost exactly what plain DDP costs on a profile holding only the
GPU box (the CPU ranks idle: no data, no compute, no collective), and the analytical re-timing of the
sensitivity sweep must agree with the engine for it.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from sensitivity_setups import TINY_PROFILE, _config

from distrepro.api.method import ClusterView, DeviceView
from distrepro.config.run_config import validate_config
from distrepro.engine.evaluation import consensus_distance
from distrepro.engine.inprocess import InProcessEngine
from distrepro.engine.multiprocess.launch import DistEngine
from distrepro.job.resolve import build_job
from distrepro.plugins.registry import get_method
from distrepro.sensitivity.analytic import simulate
from distrepro.sensitivity.probe import Prober


def _profiles(tmp_path: Path) -> tuple[str, str]:
    mixed = tmp_path / "mixed.yaml"
    # DDP on the GPUs alone runs NCCL among them; the mixed cluster's default backend (gloo: it has CPUs) would
    # charge no contention with backward, so the comparison names the backend both clusters' GPUs use
    nccl = {"backend": "nccl", "source": "[E] test"}
    mixed.write_text(yaml.safe_dump({**TINY_PROFILE, "framework": nccl}, sort_keys=False))
    gpus = copy.deepcopy(TINY_PROFILE)
    gpus["nodes"], gpus["name"] = gpus["nodes"][:1], "tiny-gpus"
    only = tmp_path / "gpus.yaml"
    only.write_text(yaml.safe_dump(gpus, sort_keys=False))
    return str(mixed), str(only)


@pytest.mark.smoke
@pytest.mark.parametrize("overlap", [True, False])
def test_gpu_only_ddp_costs_what_ddp_on_the_gpus_alone_costs(overlap: bool, tmp_path: Path) -> None:
    mixed, only = _profiles(tmp_path)
    job = build_job(validate_config(_config(mixed, "ar_sgd", {"devices": "gpu", "overlap": overlap})), 1)
    result = InProcessEngine().run(job)
    alone = InProcessEngine().run(build_job(validate_config(_config(only, "ar_sgd", {"overlap": overlap})), 1))
    assert result.emulated_s == alone.emulated_s
    assert result.final.samples == alone.final.samples and result.final.step == alone.final.step
    cpu = result.final.workers[2]
    assert cpu.samples == 0 and cpu.compute_s == 0 and cpu.bytes_sent == 0 and cpu.clock_s == 0
    assert all(a.batch_sizes[2] == 0 and a.shares[2] == 0 for _, a in result.allocations)
    # the idle replica never moves, so the evaluated model is rank 0's and the consensus distance is over
    # the GPU replicas, which stay identical (over all three it would be > 0: the CPU's is the initial model)
    assert all(e.metrics["consensus_distance"] == 0.0 for e in result.evals)
    assert consensus_distance(result.models) > 0
    timing = simulate(job, Prober(job))
    assert timing.emulated_s == pytest.approx(result.emulated_s, rel=1e-12)


def test_gpu_only_allocation_and_its_errors() -> None:
    cls = get_method("ar_sgd").cls
    params = cls.Params(devices="gpu")

    def view(kinds: list[str]) -> ClusterView:
        devices = tuple(DeviceView(r, f"d{r}", k, 10.0) for r, k in enumerate(kinds))
        return ClusterView(len(kinds), devices, 100, tuple([8] * len(kinds)))

    alloc = cls.allocate(params, view(["gpu", "gpu", "cpu", "cpu"]))
    assert alloc.shares == (0.5, 0.5, 0.0, 0.0) and alloc.batch_sizes == (8, 8, 0, 0)
    assert cls.evaluated_on(params) == "rank0" and cls.evaluated_on(cls.Params()) == "average"
    assert cls.trained_ranks(params, ("gpu", "gpu", "cpu")) == (0, 1)
    assert cls.trained_ranks(cls.Params(), ("gpu", "gpu", "cpu")) is None
    with pytest.raises(ValueError, match="rank 0"):
        cls.allocate(params, view(["cpu", "gpu"]))
    with pytest.raises(ValueError, match="needs GPUs"):
        cls.allocate(params, view(["cpu", "cpu"]))


@pytest.mark.distributed
def test_gpu_only_consensus_distance_on_the_dist_engine(tmp_path: Path) -> None:
    """The distributed engine's reduce takes the consensus distance over the GPU replicas too (the idle CPU
    rank contributes zeros), and evaluates the same model as the in-process engine."""
    mixed, _ = _profiles(tmp_path)
    cfg = validate_config(_config(mixed, "ar_sgd", {"devices": "gpu"}, dist={"timeout_s": 60}))
    a = InProcessEngine().run(build_job(cfg, 1))
    b = DistEngine().run_cell(build_job(cfg.model_copy(update={"engine": "dist"}), 1), None)
    assert [e.metrics["consensus_distance"] for e in b.evals] == pytest.approx([0.0] * len(a.evals), abs=1e-12)
    assert b.final.metrics["val_accuracy"] == pytest.approx(a.final.metrics["val_accuracy"], abs=1e-9)
    assert b.emulated_s == pytest.approx(a.emulated_s, rel=1e-9)
