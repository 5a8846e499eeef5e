"""Entry point of one rank of the distributed engine: ``python -m distrepro.engine.multiprocess.worker``.

Started by the launcher (:mod:`distrepro.engine.multiprocess.launch`), by ``torchrun`` or by ``srun``; reads
its rank from ``--rank``/``--world-size`` or from the ``RANK``/``WORLD_SIZE`` variables that
torchrun and the SLURM recipe set. Every rank builds the same job from the same config (data,
partition and initial model are derived from seeds, so no rank needs to ship them to another),
pins itself, joins the process group and trains. Rank 0 logs to the MLflow run the launcher
created and writes the result for the launcher. Each rank writes a status file, so the launcher
can say which rank failed and how.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from distrepro.job.engine import RunSink
    from distrepro.job.observer import RunObserver


def _status(out: Path, rank: int, **fields: object) -> None:
    (out / f"rank{rank}.status.json").write_text(json.dumps({"rank": rank, "time": time.time(), **fields}))


def choose_backend(requested: str, gpu_ranks_all: bool) -> str:
    """NCCL only when every rank is a GPU worker with a GPU (NCCL refuses two ranks on one GPU)."""
    if requested != "auto":
        return requested
    if gpu_ranks_all and torch.cuda.is_available():
        return "nccl"
    return "gloo"


def _warm_up() -> None:
    """Pay one-off import costs before joining the process group, so that slow starters on a busy
    host are not mistaken for hung ranks: the first optimizer imports ``torch._dynamo`` (3-4 s)."""
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--job", required=True, help="job JSON written by the launcher")
    ap.add_argument("--out", required=True, help="folder for status and result files")
    ap.add_argument("--rank", type=int, default=None)
    ap.add_argument("--world-size", type=int, default=None)
    ap.add_argument("--init", default="env://", help="file:///path for file rendezvous, env:// under torchrun")
    args = ap.parse_args(argv)
    rank = args.rank if args.rank is not None else int(os.environ["RANK"])
    world = args.world_size if args.world_size is not None else int(os.environ["WORLD_SIZE"])
    out = Path(args.out)
    spec = json.loads(Path(args.job).read_text())
    try:
        from distrepro.config.run_config import validate_config
        from distrepro.engine.multiprocess.pinning import pin_worker
        from distrepro.job.resolve import build_job

        cfg = validate_config(spec["config"], spec.get("source"))
        job = build_job(cfg, int(spec["seed"]), spec.get("source"))
        if job.world_size != world:
            raise ValueError(f"profile {job.profile.name} has {job.world_size} workers but {world} ranks started")
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        note = pin_worker(job, rank, local_rank, world, local_world)
        gpu_all = all(job.profile.device(r).kind == "gpu" for r in range(world))
        backend = choose_backend(cfg.dist.backend, gpu_all)
        dist.init_process_group(
            backend,
            init_method=args.init,
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=cfg.dist.startup_timeout_s),
        )
        from distrepro.engine.multiprocess.run import DistRun, store_of_default_group

        observer: RunObserver | None = None
        sink: RunSink | None = None
        if rank == 0 and spec.get("run_id"):  # the launcher's run, reopened here by what the caller handed it
            sink = pickle.loads((out / "sink.pkl").read_bytes())()
            sink.set_tags({"distrepro.backend": backend, "distrepro.pinning": note})
            observer = sink.observer()
        if rank == 0:
            from distrepro.engine.multiprocess.launch import ProgressFile
            from distrepro.job.observer import Fanout

            observer = Fanout(observer, ProgressFile(out / "progress.json"))
        ckpt = Path(spec["checkpoint_dir"]) if spec.get("checkpoint_dir") else None
        resume = Path(spec["resume_from"]) if spec.get("resume_from") else None
        run = DistRun(job, rank, store_of_default_group(), observer, checkpoint_root=ckpt, resume_from=resume)
        result = run.run()
        if sink is not None:
            if run.pacer is not None:
                sink.set_tags(throttle_tags(run.pacer.dilation, run.calibration, result.pacing if result else None))
            sink.flush()
        if result is not None:
            (out / "result.pkl").write_bytes(pickle.dumps(result))
        _status(out, rank, status="ok", pinning=note)
        dist.destroy_process_group()
        return 0
    except BaseException as exc:
        from distrepro.plugins.crash_site import crash_site

        error = f"{type(exc).__name__}: {exc}{crash_site(exc)}"  # the plugin's file:line, where a plugin raised
        _status(out, rank, status="error", error=error, traceback=traceback.format_exc())
        if os.environ.get("DISTREPRO_DEBUG"):  # --debug: the rank's own traceback, not the launcher's
            traceback.print_exc(file=sys.stderr)
        print(f"distrepro rank {rank}: {error}", file=sys.stderr, flush=True)
        return 1


def throttle_tags(
    dilation: float, calibration: dict[str, Any], pacing: list[dict[str, float]] | None
) -> dict[str, str]:
    """The run's throttling, as MLflow tags: the dilation, its calibration and how far behind any rank fell."""
    from distrepro.engine.multiprocess.pacing import behind_message, pacing_held

    tags = {"distrepro.throttle.dilation": f"{dilation:.4g}", "distrepro.throttle.calibration": json.dumps(calibration)}
    if pacing:
        tags |= {
            "distrepro.throttle.max_late_s": f"{max(r['max_late_s'] for r in pacing):.4g}",
            "distrepro.throttle.pacing": json.dumps(pacing),
            "distrepro.throttle.held": str(pacing_held(pacing)).lower(),
        }
        message = behind_message(pacing)
        if message:
            tags["distrepro.throttle.warning"] = message
    return tags


if __name__ == "__main__":
    code = main()
    # Skip the interpreter's teardown: everything is written and the status reported by now, and
    # C++ extensions can abort there (DeepSpeed 0.19 on gloo: "terminate called without an active
    # exception", SIGABRT in about 1 run in 15).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
