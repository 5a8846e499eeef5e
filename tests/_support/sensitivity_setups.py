"""Shared by several test modules (moved out of test_sensitivity.py so tests in other folders can use it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from distrepro.claims.papers import PaperInfo
from distrepro.claims.runs import RunSet
from distrepro.claims.schema import validate_paper
from distrepro.config.run_config import validate_config
from distrepro.job.resolve import Job, build_job
from distrepro.sensitivity.analytic import simulate
from distrepro.sensitivity.probe import Prober

WORKLOAD = "resnet18_in100_224"


SPEED = 100.0  # samples/s of every device of the flip profile


TINY_PROFILE = {
    "schema_version": 1,
    "name": "tiny-sens",
    "description": "2 GPUs in a box, 1 CPU behind a NIC",
    "nodes": [
        {
            "name": "box",
            "devices": [
                {"name": "gpu", "kind": "gpu", "count": 2, "memory_gib": 8, "batch_size": 16,
                 "throughput_samples_per_s": {WORKLOAD: 400.0}, "source": "[E] test",
                 "speed_changes": [{"at_s": 0.05, "factor": 0.5}],
                 "ranges": {"speed": {"low": 0.5, "high": 2.0, "reason": "test"}}},
            ],
        },
        {
            "name": "cpu_box",
            "devices": [
                {"name": "cpu", "kind": "cpu", "count": 1, "memory_gib": 8, "batch_size": 2,
                 "throughput_samples_per_s": {WORKLOAD: 20.0}, "source": "[E] test",
                 "jitter": {"kind": "lognormal", "sigma": 0.1}, "straggler": {"probability": 0.2, "slowdown": 2.0},
                 "nic": {"latency_us": 100, "bandwidth_gbytes_per_s": 0.1, "source": "[E] test",
                         "ranges": {"bandwidth_gbytes_per_s": {"low": 0.1, "high": 1.0, "reason": "1-10 GbE"}}},
                 "ranges": {"speed": {"low": 0.5, "high": 2.0, "reason": "test"}}},
            ],
        },
    ],
    "network": {
        "intra_node": {"latency_us": 10, "bandwidth_gbytes_per_s": 8, "source": "[E] test"},
        "inter_node": {"latency_us": 50, "bandwidth_gbytes_per_s": 1.0, "source": "[E] test"},
        "server": {"latency_us": 50, "bandwidth_gbytes_per_s": 1.0, "source": "[E] test",
                   "ranges": {"bandwidth_gbytes_per_s": {"low": 0.1, "high": 3.0, "reason": "1-25 GbE"}}},
    },
}  # fmt: skip


FLIP_PROFILE = {
    "schema_version": 1,
    "name": "flip-sens",
    "description": "two equal GPUs on two machines; only the link between them is uncertain",
    "nodes": [
        {"name": f"m{i}", "devices": [{"name": "gpu", "kind": "gpu", "count": 1, "memory_gib": 8,
                                        "throughput_samples_per_s": {WORKLOAD: SPEED}, "source": "[S] test"}]}
        for i in range(2)
    ],
    "network": {
        "intra_node": {"latency_us": 0, "bandwidth_gbytes_per_s": 8, "source": "[S] test"},
        "inter_node": {"latency_us": 0, "bandwidth_gbytes_per_s": 1.0, "source": "[E] test",
                       "ranges": {"bandwidth_gbytes_per_s": {"low": 0.01, "high": 10.0, "reason": "test"}}},
    },
    # the one uncertain figure is the link: NCCL's contention with backward (a sweep variable of a GPU cluster) is
    # pinned off, as the arms overlap nothing anyway
    "framework": {"contention": 0.0, "source": "[S] test"},
}  # fmt: skip


def _config(profile: str, method: str, params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "method": method,
        "method_params": params,
        "profile": profile,
        "dataset": {"name": "synthetic", "params": {"num_classes": 4, "image_size": 8, "train_size": 96,
                                                     "test_size": 16}},
        "model": {"name": "small_cnn", "params": {"hidden": 8}},
        "emulated_workload": WORKLOAD,
        "batch_size": "profile",
        "budget": {"epochs": 2},
        "eval": {"times": 1},
        "torch_threads": 1,
        **extra,
    }  # fmt: skip


#: one seed on a noiseless clock: a point rule is refused for a claim decided by measurement below 10 seeds, so the
#: fixture's claims say what they are, deterministic functions of the emulated hardware
DETERMINISTIC = {"decided_by": "model_structure", "why": "one seed on a noiseless emulated clock"}

FLIP_PAPER = {
    "kind": "reproduction",
    "citation": {"id": "flip", "title": "A claim that flips with the network"},
    "setup": {
        "min_seeds": 1,
        "baseline": "small",
        "arms": {"small": {"method": "ar_sgd", "campaign": "small"}, "big": {"method": "ar_sgd", "campaign": "big"}},
        "sensitivity": {"samples": 40},
    },
    "claims": [
        {"id": "F1", "kind": "speedup", "arm": "big", "claimed": 2.0, "accept": {"sided": "one_sided", "rule": "point"},
         "statement": "batch 32 trains the budget at least twice as fast as batch 8", "source": {"kind": "text"},
         "evidence": "reconstructed", **DETERMINISTIC},
        {"id": "F2", "kind": "final_metric", "arm": "big", "metric": "val_accuracy", "direction": "max",
         "claimed": 0.5, "accept": {"rule": "point"}, "source": {"kind": "text"},
         "evidence": "reconstructed", **DETERMINISTIC},
    ],
}  # fmt: skip


def _flip_setup(
    profile: str, paper: dict[str, Any] | None = None, profile_name: str = "flip-sens", train_size: int = 96
) -> tuple[PaperInfo, Any, dict[str, Job]]:
    """Two arms of ``ar_sgd`` (batch 8 and 32 per rank, 512 samples) on ``profile``, as a tracked run table would
    hold them, and ``paper`` (default :data:`FLIP_PAPER`) judging them (``train_size``: enough samples that every
    rank's shard holds a batch of 32)."""
    jobs: dict[str, Job] = {}
    rows = []
    for arm, batch in (("small", 8), ("big", 32)):
        cfg = _config(
            profile, "ar_sgd", {"weighting": "equal", "overlap": False}, batch_size=batch, budget={"samples": 512}
        )
        cfg["dataset"]["params"]["train_size"] = train_size
        job = jobs[f"{arm}-0"] = build_job(validate_config(cfg), 0)
        rows.append(
            {"run_id": f"{arm}-0", "parent_run_id": f"c-{arm}", "method": "ar_sgd", "profile": profile_name, "seed": 0,
             "status": "FINISHED", "start_time": pd.Timestamp("2026-01-01", tz="UTC"), "campaign": arm,
             "final/emulated_s": simulate(job, Prober(job)).emulated_s, "final/val_accuracy": 0.5,
             "engine": "inprocess"}
        )  # fmt: skip
    runs = pd.DataFrame(rows)
    alloc = pd.DataFrame(columns=["run_id", "epoch", "rank", "share", "batch_size", "speed"])
    curves = pd.DataFrame(columns=["run_id", "step"])
    rs = RunSet("distrepro/flip", "sqlite:///nowhere.db", runs, curves, alloc, ["c-small", "c-big"])
    return PaperInfo("flip", validate_paper(paper or FLIP_PAPER)), rs, jobs


#: the probe cases the meta-step and probe tests both replay: C-ADP's rounds and Chao's adaptive allocation
PROBE_CASES = [
    ("cadp", {"micro_batch": [16, 16, 2], "round_epochs": 1, "warmup_steps": 2}),
    ("chao_alloc", {"mode": "adaptive", "global_batch": 34, "overlap": False}),
]


def write_tiny_profile(folder: Path) -> str:
    """:data:`TINY_PROFILE` written as ``<name>.yaml`` in ``folder``: the path a config's ``profile`` names."""
    path = folder / f"{TINY_PROFILE['name']}.yaml"
    path.write_text(yaml.safe_dump(TINY_PROFILE, sort_keys=False))
    return str(path)


def probe_events(prober: Prober, job: Job, sizes: list[int | None]) -> list[Any]:
    """What ``prober`` records for every rank of ``job`` at each batch size of ``sizes``: two probes compared whole."""
    return [prober._run(job.params, rank, n) for rank in range(job.world_size) for n in sizes]
