"""The tensors a method hands a ``ctx.comm`` call, checked where they come in.

``ctx.comm.all_reduce([t])`` (a list where one tensor goes) ended deep in an engine in ``'list' object has no
attribute 'detach'``, blamed on nothing the plugin author could find; both engines check their arguments here
instead, and the error names the call and what it was given.
"""

from __future__ import annotations

from typing import Any

import torch

from distrepro.errors import CommError


def _a(value: Any) -> str:
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def one_tensor(call: str, tensor: Any) -> torch.Tensor:
    """``tensor``, if it is one; else :class:`CommError` naming ``ctx.comm.<call>`` and what it got."""
    if isinstance(tensor, torch.Tensor):
        return tensor
    hint = f"; several tensors go to ctx.comm.{call}_coalesced" if isinstance(tensor, (list, tuple)) else ""
    if call != "all_reduce":
        hint = "; one call per tensor" if hint else ""
    raise CommError(f"ctx.comm.{call}: expects one tensor, got {_a(tensor)}{hint}")


def tensor_list(call: str, tensors: Any) -> list[torch.Tensor]:
    """``tensors`` (any iterable of tensors) as a list; else :class:`CommError` naming the call and the bad item."""
    if isinstance(tensors, torch.Tensor):
        raise CommError(f"ctx.comm.{call}: expects a list of tensors, got one tensor; pass [tensor]")
    try:
        items = list(tensors)
    except TypeError:
        raise CommError(f"ctx.comm.{call}: expects a list of tensors, got {_a(tensors)}") from None
    for i, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            raise CommError(f"ctx.comm.{call}: item {i} of the list is {_a(item)}, not a tensor")
    return items
