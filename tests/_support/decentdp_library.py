"""The ``decent-dp`` library's side of ``tests/methods/test_decentdp_equivalence.py``: the tiny model, data and
optimizers both sides train, and one gloo rank running the library's ``DecentralizedDataParallel`` over them.

A rank is :func:`library_rank`, which the test forks from its zygote (:mod:`zygote_ranks`):
``torch.multiprocessing.spawn`` started four fresh interpreters, each spending about
3 s of CPU importing torch, the test module and the library before its few steps. A rank is still a process of its
own in a gloo group of four; only the imports are shared.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

WORLD, LOCAL, STEPS = 4, 2, 6
TOPOLOGIES = ("complete", "ring", "one-peer-exp", "alternating-exp-ring")
OPTIMIZERS: dict[str, dict[str, Any]] = {
    "adam": {"lr": 0.05, "betas": (0.9, 0.999), "eps": 1e-8},
    "accum_adam": {"lr": 0.05, "betas": (0.9, 0.999), "eps": 1e-8, "accum_iter": 2},
}


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(5, 6, generator=g), torch.randint(0, 3, (5,), generator=g)


def library_rank(rank: int, rendezvous: str, out: str) -> None:
    """Train every optimizer and topology with the library on ``rank``; save the parameters to ``out`` (``{rank}``)."""
    import torch.distributed as dist
    from decent_dp.ddp import DecentralizedDataParallel
    from decent_dp.optim import AccumAdam

    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=WORLD)
    results: dict[str, list[torch.Tensor]] = {}
    for opt_name, kw in OPTIMIZERS.items():
        for name in TOPOLOGIES:
            model = tiny_model()

            def optim_fn(params: list[tuple[str, torch.Tensor]], opt_name: str = opt_name, kw: dict = kw) -> Any:
                tensors = [p for _, p in params]
                if opt_name == "adam":
                    return torch.optim.Adam(tensors, **kw)
                return AccumAdam(tensors, weight_decay=0.0, **kw)

            ddp = DecentralizedDataParallel(model, optim_fn, topology=name, _local_world_size=LOCAL)
            ddp.train()
            for step in range(1, STEPS + 1):
                x, y = batch(rank, step)
                F.cross_entropy(ddp(x), y).backward()
            results[f"{opt_name}/{name}"] = [p.detach().clone() for p in model.parameters()]
    torch.save(results, out.format(rank=rank))
    dist.barrier()
    dist.destroy_process_group()
