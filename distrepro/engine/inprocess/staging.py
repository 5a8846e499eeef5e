"""Buffers of the in-process collectives: a non-blocking operation's copy of its inputs, flattening,
reductions in rank order.

Kept apart from the request matching in :mod:`distrepro.engine.inprocess.comm`: this is the data path, whose
cost per worker-step is what the in-process overhead benchmark (``benchmarks/inprocess_overhead.py``)
compares with a plain loop's.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from distrepro.api.method import ReduceOp


def reduce(stacked: list[torch.Tensor], op: ReduceOp) -> torch.Tensor:
    if op in ("sum", "mean"):
        out = stacked[0].clone()
        for t in stacked[1:]:
            out.add_(t)
        return out / len(stacked) if op == "mean" else out
    out = stacked[0].clone()
    for t in stacked[1:]:
        out = torch.maximum(out, t) if op == "max" else torch.minimum(out, t)
    return out


class _Staged(list[torch.Tensor]):
    """A non-blocking operation's copy of its inputs: views into one flat buffer, taken at issue.

    One ``cat`` instead of a clone per tensor, and the collective reads and writes the buffer whole
    (:func:`flat`, :func:`unflat_into`), which is what keeps the engine's cost per worker-step near a
    plain loop's for a DDP step overlapped bucket by bucket (a clone, a flatten and an unflatten per
    tensor otherwise). The caller's tensors still receive the results only at ``wait()``.
    """

    flat: torch.Tensor


def stage(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Copies of ``tensors`` as they are now (one buffer when they share a dtype, else one clone each)."""
    if not tensors or len({t.dtype for t in tensors}) != 1:
        return [t.detach().clone() for t in tensors]
    staged = _Staged()
    staged.flat = torch.cat([t.detach().reshape(-1) for t in tensors])
    offset = 0
    for t in tensors:
        n = t.numel()
        staged.append(staged.flat[offset : offset + n].view_as(t))
        offset += n
    return staged


def flat(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The tensors as one flat tensor, to read (a staged buffer is returned as is, not copied)."""
    if isinstance(tensors, _Staged):
        return tensors.flat
    return torch.cat([t.detach().reshape(-1) for t in tensors]) if tensors else torch.zeros(0)


def unflat_into(flat: torch.Tensor, tensors: Sequence[torch.Tensor]) -> None:
    if isinstance(tensors, _Staged):
        tensors.flat.copy_(flat)
        return
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[offset : offset + n].view_as(t))
        offset += n
