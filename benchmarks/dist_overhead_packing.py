"""``dist_overhead.py --packing``: the work around distrepro's gradient collective, timed in one process.

Not a script. Apart from the rank processes because it needs none: a gloo group of one rank, where the all-reduce
costs nothing, leaves only the packing to time (``dist_overhead.py`` prints the table and writes the JSON).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from typing import Any


def packing_micro(models: list[str], image_size: int) -> list[dict[str, Any]]:
    """Per-call cost of distrepro's gradient collective vs a bucket copy, in one process (gloo world of 1).

    With one rank the all-reduce itself costs nothing, so what is left is the Python and memory work
    around it: DistComm's packing (concatenations, clock slots, unpacking, copies back) against copying
    the gradients into one bucket and back, which is what DDP does without ``gradient_as_bucket_view``.
    """
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from distrepro.config.run_config import validate_config
    from distrepro.engine.clock import VirtualClock
    from distrepro.engine.multiprocess.comm import DistComm
    from distrepro.job.resolve import build_job

    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="dist-overhead-micro-")
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rdzv", rank=0, world_size=1)
    rows = []
    try:
        for name in models:
            cfg = {"method": "ar_sgd", "profile": "bench-homogeneous-2", "model": {"name": name}}
            cfg["dataset"] = {"name": "synthetic", "params": {"image_size": image_size}}
            job = build_job(validate_config(cfg), 0)
            model = job.make_model()
            x, y = job.bundle.tensors("train")
            F.cross_entropy(model(x[:32]), y[:32]).backward()
            grads = [p.grad for p in model.parameters()]
            comm = DistComm(0, 1, VirtualClock(0, 0), job.cost, 1.0)
            n = 1000 if sum(g.numel() for g in grads) < 1_000_000 else 30

            def timed(fn: Any, n: int = n) -> float:
                for _ in range(5):
                    fn()
                ts = []
                for _ in range(n):
                    t = time.perf_counter()
                    fn()
                    ts.append(time.perf_counter() - t)
                return 1e3 * statistics.median(ts)

            def bucket(grads: list[Any] = grads) -> None:
                flat = torch.cat([g.reshape(-1) for g in grads])
                dist.all_reduce(flat)
                for g, v in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
                    g.copy_(v.view_as(g))

            rows.append(
                {
                    "model": name,
                    "gradient_mb": sum(g.numel() for g in grads) * 4 / 1e6,
                    "bucket_ms": timed(bucket),
                    "mean_ms": timed(lambda grads=grads, comm=comm: comm.all_reduce_coalesced(grads, op="mean")),
                    "weighted_ms": timed(lambda grads=grads, comm=comm: comm.weighted_average(grads, weight=32)),
                    "charge_ms": timed(lambda job=job: job.compute_seconds(0, 32, 5, 1.0)),
                }
            )
    finally:
        dist.destroy_process_group()
    return rows
