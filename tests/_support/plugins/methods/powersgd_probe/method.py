"""Test-only method: a PowerSGD-like compressor, written as an outside plugin would be (``from distrepro import api``).

Each step, every gradient matrix ``M`` (a weight reshaped to rows × the rest) is sent as rank-``r`` factors, one
power iteration of Vogels et al., "PowerSGD: Practical Low-Rank Gradient Compression for Distributed
Optimization" (NeurIPS 2019), Algorithm 1: ``P = M Q``, all-reduce ``P``, orthogonalise it, ``Q = Mᵀ P``,
all-reduce ``Q``, ``M ≈ P Qᵀ``; vectors (biases, norms) are all-reduced whole. No error feedback (the paper adds
it; a probe of the plan contract needs only the traffic). Its :meth:`Method.plan` states exactly that traffic
from :attr:`api.PlanSetting.parameters`, so ``distrepro plan`` prices a method that sends less than the model.
"""

from __future__ import annotations

import zlib

import torch

from distrepro import api


class Params(api.MethodParams):
    lr: api.PeakLR = 0.05
    rank: api.PositiveInt = 2


def _as_matrix(shape: tuple[int, ...]) -> tuple[int, int] | None:
    """(rows, columns) a tensor of ``shape`` is compressed as, None for a vector (sent whole)."""
    if len(shape) < 2:
        return None
    cols = 1
    for size in shape[1:]:
        cols *= size
    return shape[0], cols


def factor_elements(shape: tuple[int, ...], rank: int) -> tuple[int, int] | None:
    """Elements of P and of Q for one tensor; rank is capped by the matrix's smaller side."""
    matrix = _as_matrix(shape)
    if matrix is None:
        return None
    rows, cols = matrix
    r = min(rank, rows, cols)
    return rows * r, cols * r


class Method(api.Method[Params]):
    synchronous = True

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """Per step: one all-reduce of every P (coalesced), one of every Q, one of the vectors; as charged bytes."""
        p_bytes = q_bytes = whole = 0.0
        for tensor in setting.parameters:
            sizes = factor_elements(tensor.shape, params.rank)
            if sizes is None:
                whole += tensor.nbytes
            else:
                p_bytes += sizes[0] * tensor.dtype_bytes
                q_bytes += sizes[1] * tensor.dtype_bytes
        scale = setting.bytes_scale
        sends = [api.Transfer("all_reduce", p_bytes * scale), api.Transfer("all_reduce", q_bytes * scale)]
        if whole:
            sends.append(api.Transfer("all_reduce", whole * scale))
        real = sum(t.nbytes for t in setting.parameters)
        facts = {"rank": params.rank, "compression": real / max(p_bytes + q_bytes + whole, 1.0)}
        return api.MethodPlan(transfers=tuple(sends), facts=facts)

    def setup(self, ctx: api.WorkerContext) -> None:
        self.opt = ctx.register_optimizer(api.sgd(ctx.model, self.params.lr, 0.0, 0.0))
        self.q: dict[str, torch.Tensor] = {}

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        ctx.forward_backward(batch)
        named = [(n, q) for n, q in ctx.model.named_parameters() if q.grad is not None]
        matrices: list[tuple[str, torch.Tensor]] = []
        vectors: list[tuple[str, torch.Tensor]] = []
        for name, param in named:
            grad = param.grad
            assert grad is not None
            (vectors if grad.dim() < 2 else matrices).append((name, grad))
        ps: list[torch.Tensor] = []
        qs: list[torch.Tensor] = []
        for name, grad in matrices:
            m = grad.reshape(grad.shape[0], -1)
            r = min(self.params.rank, *m.shape)
            if name not in self.q:  # the same start on every rank (``ctx.seed`` differs per rank): from the name
                gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
                self.q[name] = torch.randn(m.shape[1], r, generator=gen).to(m.device)
            ps.append(m @ self.q[name])
        if ps:
            ctx.comm.all_reduce_coalesced(ps, op="mean")
        for i, (_name, grad) in enumerate(matrices):
            ps[i] = torch.linalg.qr(ps[i]).Q
            qs.append(grad.reshape(grad.shape[0], -1).T @ ps[i])
        if qs:
            ctx.comm.all_reduce_coalesced(qs, op="mean")
        for (name, grad), p, q in zip(matrices, ps, qs, strict=True):
            grad.copy_((p @ q.T).reshape(grad.shape))
            self.q[name] = q
        if vectors:
            ctx.comm.all_reduce_coalesced([g for _, g in vectors], op="mean")
        self.opt.step()
