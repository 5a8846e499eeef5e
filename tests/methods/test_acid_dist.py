"""A²CiD² on real processes: 4 gloo ranks (file rendezvous in a temporary folder), each with its gossip agent
thread, pair with ready neighbours through the coordinator, exchange beside their computation without deadlock,
and keep the run's contract."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distrepro.config.run_config import validate_config
from distrepro.engine.multiprocess.launch import DistEngine
from distrepro.job.resolve import build_job

pytestmark = pytest.mark.distributed


def test_acid_runs_on_four_processes(profiles: Path) -> None:
    cfg = validate_config(
        {
            "method": "acid",
            "engine": "dist",
            "profile": "hetero-2fast-2slow",  # two half-speed ranks: the fast ones take more steps
            "method_params": {"topology": "ring", "rate": 1.0, "init_spread": 0.01},
            "dataset": {"params": {"train_size": 512, "test_size": 64, "image_size": 8}},
            "model": {"name": "small_cnn", "params": {"hidden": 8}},
            "batch_size": 8,
            "budget": {"steps": 8},
            "eval": {"every_steps": 4},
            "dist": {"timeout_s": 60},
        }
    )
    job = build_job(cfg, 0)
    vector = sum(p.numel() * p.element_size() for p in job.make_model().parameters())
    run = DistEngine().run_cell(job, None)
    assert all([w.rank for w in e.workers] == [0, 1, 2, 3] for e in run.evals)
    sent = [w.bytes_sent for w in run.final.workers]
    assert all(s > 0 and s % vector == 0 for s in sent)  # whole parameter vectors, every rank took part
    distances = [e.metrics["consensus_distance"] for e in run.evals]
    # distinct starts (N(0, 0.01²) per parameter: (1/n) Σ‖x_i − x̄‖² ≈ 0.01² d (n − 1)/n); gossip pulls them
    # together while the different data push them apart (which pairs form follows real arrival order)
    start = 0.01**2 * (vector // 4) * 3 / 4
    assert all(d < start / 4 for d in distances), (distances, start)
    assert all(torch.isfinite(torch.tensor(distances)))
    assert run.final.method_records["averagings_per_step"] > 0
