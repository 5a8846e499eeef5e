"""Hand-written reference: plain PyTorch DDP training of ``small_cnn`` on gloo, one process per rank.

This is what a user would write without distrepro, and the baseline of
``benchmarks/dist_overhead.py``. Only the *setup* borrows from the suite, so that both sides train
exactly the same thing: the synthetic dataset and the initial weights come from
``distrepro.job.resolve.build_job`` of the same config (bit-identical tensors and weights); everything that is
timed is plain torch: ``DistributedDataParallel`` (default 25 MB buckets, gradient all-reduce
overlapped with backward), ``torch.optim.SGD`` with momentum, and a per-rank shard (rank r takes
every world-th sample, like ``DistributedSampler``) reshuffled every pass and gathered with
``index_select``, as distrepro's streams do.

Launch with torchrun::

    torchrun --standalone --nproc-per-node=2 benchmarks/plain_ddp.py --steps 300 --out stamps.json

or start one process per rank with ``--rank R --world-size W --init file://$RDZV_DIR/rdzv`` (what the
overhead benchmark does, so that both sides start the same way). Rank 0 writes a JSON file with a
``time.perf_counter()`` stamp after every step (taken after ``optimizer.step()``), the loss and
the settings (every rank does when ``--out`` contains ``{rank}``); the CPU time of the process
(``time.process_time()``, all its threads) is stamped alongside.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    ap.add_argument("--batch-size", type=int, default=32, help="per-rank batch size (default 32)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--model", default="small_cnn", help="distrepro.training.models name (default small_cnn)")
    ap.add_argument("--image-size", type=int, default=16)
    ap.add_argument("--train-size", type=int, default=4096)
    ap.add_argument(
        "--profile",
        default="homogeneous-4",
        help="distrepro profile whose run this mirrors (seeds the initial weights)",
    )
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP bucket size (default 25, as DDP)")
    ap.add_argument(
        "--out", default=None, help="rank 0 writes its step stamps here (JSON); with '{rank}' in it, every rank does"
    )
    ap.add_argument("--rank", type=int, default=None, help="default: $RANK (torchrun)")
    ap.add_argument("--world-size", type=int, default=None, help="default: $WORLD_SIZE (torchrun)")
    ap.add_argument("--init", default="env://", help="file:///path, tcp://host:port or env:// (torchrun)")
    return ap.parse_args(argv)


def setup_data_and_model(args: argparse.Namespace, world: int):
    """The same dataset tensors and initial weights as a distrepro run of the same config (seed 0)."""
    from distrepro.config.run_config import validate_config
    from distrepro.job.resolve import build_job

    cfg = validate_config(
        {
            "method": "ar_sgd",
            "profile": args.profile,
            "dataset": {"name": "synthetic", "params": {"image_size": args.image_size, "train_size": args.train_size}},
            "model": {"name": args.model},
            "batch_size": args.batch_size,
        }
    )
    job = build_job(cfg, 0)
    inputs, targets = job.bundle.tensors("train")
    return inputs, targets, job.make_model()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank = args.rank if args.rank is not None else int(os.environ["RANK"])
    world = args.world_size if args.world_size is not None else int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=args.init, rank=rank, world_size=world, timeout=timedelta(seconds=120))

    inputs, targets, model = setup_data_and_model(args, world)
    ddp = DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    shard = torch.arange(rank, inputs.shape[0], world)
    gen = torch.Generator().manual_seed(1000 + rank)
    order, pos = shard[torch.randperm(shard.numel(), generator=gen)], 0

    dist.barrier()
    stamps, cpu = [time.perf_counter()], [time.process_time()]
    loss_sum = 0.0
    for _ in range(args.steps):
        if pos + args.batch_size > order.numel():  # new pass: reshuffle the shard
            order, pos = shard[torch.randperm(shard.numel(), generator=gen)], 0
        idx = order[pos : pos + args.batch_size]
        pos += args.batch_size
        x, y = inputs.index_select(0, idx), targets.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        loss_sum += loss.item()
        stamps.append(time.perf_counter())
        cpu.append(time.process_time())

    if args.out and (rank == 0 or "{rank}" in args.out):
        Path(args.out.replace("{rank}", str(rank))).write_text(
            json.dumps(
                {
                    "variant": "plain_ddp",
                    "rank": rank,
                    "world_size": world,
                    "threads": torch.get_num_threads(),
                    "batch_size": args.batch_size,
                    "steps": args.steps,
                    "stamps": stamps,
                    "cpu": cpu,
                    "mean_loss": loss_sum / max(1, args.steps),
                    "model": args.model,
                    "params": sum(p.numel() for p in model.parameters()),
                }
            )
        )
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
