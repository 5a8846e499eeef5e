"""Test-only method: probes what non-blocking collectives do with tensors changed before ``wait()``.

After a plain local SGD step, every ``train_step`` issues each non-blocking collective of
:class:`distrepro.api.method.Comm`, then overwrites its input (and output) tensors before calling ``wait()``,
and records what the tensors hold afterwards. ``torch.distributed`` semantics (both engines):
inputs are taken at issue, results land at ``wait()``, an input that is not an output is never
written. :func:`expected` gives the answers; ``tests/engine/test_inprocess_comm.py`` runs :func:`probe`
on the in-memory fabric and ``tests/engine/test_engine_agreement.py`` runs this method on both engines.
"""

from __future__ import annotations

import torch

from distrepro import api


def probe(comm: api.Comm, rank: int, world: int) -> dict[str, float]:
    """Issue, tamper, wait: what each tensor holds after ``wait()``."""
    out: dict[str, float] = {}
    t = torch.tensor([rank + 1.0])
    work = comm.all_reduce(t, async_op=True)
    t.add_(100.0)  # changed between issue and wait: the sum of the issued values still lands here
    assert work is not None
    work.wait()
    out["all_reduce"] = float(t)

    t = torch.tensor([rank + 1.0])
    work = comm.weighted_average([t], weight=1.0, async_op=True)
    t.add_(100.0)
    assert work is not None
    work.wait()
    out["weighted_average"] = float(t)

    t = torch.tensor([rank + 1.0])
    work = comm.broadcast(t, src=0, async_op=True)
    t.add_(100.0)
    assert work is not None
    work.wait()
    out["broadcast"] = float(t)

    inp = torch.arange(world, dtype=torch.float32) + 10.0 * rank
    res = torch.zeros(1)
    work = comm.reduce_scatter(res, inp, async_op=True)
    inp.add_(1000.0)  # the input is read at issue and never written
    res.fill_(-1.0)  # the output is written at wait
    assert work is not None
    work.wait()
    out["reduce_scatter"] = float(res)
    out["reduce_scatter_input"] = float(inp[0])

    inp = torch.tensor([rank + 1.0])
    res = torch.zeros(world)
    work = comm.all_gather(res, inp, async_op=True)
    inp.add_(100.0)
    res.fill_(-1.0)
    assert work is not None
    work.wait()
    out["all_gather"] = float((res * torch.arange(1.0, world + 1)).sum())  # order-sensitive checksum
    return out


def expected(rank: int, world: int) -> dict[str, float]:
    """The ``torch.distributed`` answers of :func:`probe` (the values issued, never the tampered ones)."""
    return {
        "all_reduce": world * (world + 1) / 2,
        "weighted_average": (world + 1) / 2,
        "broadcast": 1.0,
        "reduce_scatter": world * rank + 10.0 * world * (world - 1) / 2,
        "reduce_scatter_input": 1000.0 + 10.0 * rank,
        "all_gather": float(sum(i * i for i in range(1, world + 1))),
    }


class Params(api.MethodParams):
    lr: api.PeakLR = 0.1


class Method(api.Method[Params]):
    name = "nonblocking_probe"
    synchronous = True

    def setup(self, ctx: api.WorkerContext) -> None:
        p = self.params
        self.opt = api.sgd(ctx.model, p.lr, 0.0, 0.0)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        ctx.forward_backward(batch)
        self.opt.step()
        for name, value in probe(ctx.comm, ctx.rank, ctx.world_size).items():
            ctx.record(name, value)
