"""The rank processes of one ``dist_overhead.py`` run: what a distrepro rank runs, and how either side is launched.

Not a script. A distrepro rank is ``dist_overhead.py --worker`` (its ``main`` calls :func:`worker_main`), which
follows the engine's own rank entry point step for step but stamps every lockstep iteration; a plain rank is
``plain_ddp.py``. Both sides get the same rendezvous, rank environment and timeout, and leave one JSON file of
stamps per rank, which :func:`read_ranks` reads back. The launcher and the worker sit together because they share
that contract (the worker's options, the ``{rank}`` file template, the record's keys).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rank_processes import kill_left, wait_ranks

REPO = Path(__file__).resolve().parents[1]
#: the entry point whose ``--worker`` mode runs :func:`worker_main` in each distrepro rank
SCRIPT = Path(__file__).resolve().with_name("dist_overhead.py")


# ---------------------------------------------------------------------------- configuration


def make_config(args: argparse.Namespace, world: int, steps: int) -> dict[str, Any]:
    """The distrepro side's run config: the same model, data, batch and threads as ``plain_ddp.py`` is given."""
    return {
        "name": f"dist-overhead-{world}",
        "method": "ar_sgd",
        "method_params": {"lr": 0.05, "momentum": 0.9, "weighting": args.weighting} | overlap_param(args),
        "profile": f"bench-homogeneous-{world}",
        "dataset": {"name": "synthetic", "params": {"image_size": args.image_size, "train_size": args.train_size}},
        "model": {"name": args.model},
        "batch_size": args.batch_size,
        "budget": {"steps": steps},
        "eval": {"times": 1},  # only the final evaluation (eval points at the budget are skipped)
        "engine": "dist",
        "dist": {"threads_per_rank": args.threads, "timeout_s": 120},
        "seeds": [0],
    }


def overlap_param(args: argparse.Namespace) -> dict[str, bool]:
    """``overlap`` only when pinned: by default the method's own default applies (what users run)."""
    return {} if args.overlap == "default" else {"overlap": args.overlap == "on"}


def rank_env(world: int) -> dict[str, str]:
    """The environment ``DistEngine`` gives its ranks (OMP threads = cores / world, at least 1)."""
    return {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // world))}


# ---------------------------------------------------------------------------- worker mode


class StampObserver:
    """Rank 0's observer: a perf_counter stamp per lockstep iteration."""

    def __init__(self) -> None:
        self.stamps: list[float] = []
        self.cpu: list[float] = []

    def on_allocation(self, epoch: int, allocation: Any) -> None:
        pass

    def on_eval(self, record: Any) -> None:
        pass

    def on_progress(self, fraction: float, emulated_s: float) -> None:
        self.stamps.append(time.perf_counter())
        self.cpu.append(time.process_time())


def worker_main(args: argparse.Namespace) -> int:
    """One rank, as ``distrepro.engine.multiprocess.worker.main`` does it, with a stamping observer on rank 0."""
    from datetime import timedelta

    import torch.distributed as dist

    from distrepro.api.overlap import buckets
    from distrepro.config.run_config import validate_config
    from distrepro.engine.multiprocess.pinning import pin_worker
    from distrepro.engine.multiprocess.run import DistRun, store_of_default_group
    from distrepro.engine.multiprocess.worker import choose_backend
    from distrepro.job.resolve import build_job

    spec = json.loads(Path(args.job).read_text())
    cfg = validate_config(spec["config"])
    job = build_job(cfg, int(spec["seed"]))
    method_params = job.params.model_dump(mode="json")
    n_buckets = len(buckets(job.make_model(), job.bytes_scale)) if method_params.get("overlap") else 1
    rank, world = args.rank, args.world_size
    note = pin_worker(job, rank, rank, world)
    backend = choose_backend(cfg.dist.backend, False)
    dist.init_process_group(
        backend,
        init_method=args.init,
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=cfg.dist.startup_timeout_s),
    )
    observer = StampObserver()  # on every rank: DistRun calls on_progress on each after every iteration
    run = DistRun(job, rank, store_of_default_group(), observer)
    prof = cProfile.Profile() if (args.cprofile and rank == 0) else None
    if prof is not None:
        prof.enable()
    run.run()
    if prof is not None:
        prof.disable()
    out: dict[str, Any] = {
        "variant": "distrepro",
        "rank": rank,
        "world_size": world,
        "pinning": note,
        "method_params": method_params,
        "buckets": n_buckets,
        "stamps": observer.stamps,
        "cpu": observer.cpu,
    }
    if prof is not None:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(45)
        out["cprofile"] = buf.getvalue()
    Path(args.stamps_out.replace("{rank}", str(rank))).write_text(json.dumps(out))
    dist.destroy_process_group()
    return 0


# ---------------------------------------------------------------------------- launching


def _run_ranks(cmds: list[list[str]], env: dict[str, str], timeout_s: float) -> None:
    """Run one process per rank, each in its own session, so that a rank left over is killed with its children."""
    procs = [subprocess.Popen(c, env=env, start_new_session=True, cwd=REPO) for c in cmds]
    try:
        wait_ranks(procs, timeout_s, f"a rank process of {cmds[0][1]}")
    finally:
        kill_left(procs)


def run_distrepro(args: argparse.Namespace, world: int, steps: int, cprofile: bool = False) -> dict[str, Any]:
    """One distrepro run of ``world`` ranks (``dist_overhead.py --worker``); rank 0's record (see ``read_ranks``)."""
    with tempfile.TemporaryDirectory(prefix="dist-overhead-") as tmp:
        folder = Path(tmp)
        job_file = folder / "job.json"
        job_file.write_text(json.dumps({"config": make_config(args, world, steps), "seed": 0}))
        stamps = str(folder / "stamps.{rank}.json")
        init = f"file://{folder / 'rendezvous'}"
        base = [sys.executable, str(SCRIPT), "--worker", "--job", str(job_file)]
        base += ["--stamps-out", stamps, "--init", init, "--world-size", str(world)]
        if cprofile:
            base.append("--cprofile")
        _run_ranks([[*base, "--rank", str(r)] for r in range(world)], rank_env(world), args.timeout)
        return read_ranks(stamps, world)


def run_plain(args: argparse.Namespace, world: int, steps: int) -> dict[str, Any]:
    """One run of the hand-written DDP reference ``plain_ddp.py`` with the same settings; rank 0's record."""
    with tempfile.TemporaryDirectory(prefix="plain-ddp-") as tmp:
        folder = Path(tmp)
        stamps = str(folder / "stamps.{rank}.json")
        init = f"file://{folder / 'rendezvous'}"
        base = [sys.executable, str(REPO / "benchmarks" / "plain_ddp.py"), "--steps", str(steps)]
        base += ["--batch-size", str(args.batch_size), "--threads", str(args.threads), "--out", stamps]
        base += ["--image-size", str(args.image_size), "--train-size", str(args.train_size), "--model", args.model]
        base += ["--profile", f"bench-homogeneous-{world}", "--init", init, "--world-size", str(world)]
        _run_ranks([[*base, "--rank", str(r)] for r in range(world)], rank_env(world), args.timeout)
        return read_ranks(stamps, world)


def read_ranks(template: str, world: int) -> dict[str, Any]:
    """Rank 0's record, with every rank's CPU stamps under ``cpu_by_rank``."""
    recs = [json.loads(Path(template.replace("{rank}", str(r))).read_text()) for r in range(world)]
    return {**recs[0], "cpu_by_rank": [r["cpu"] for r in recs]}
