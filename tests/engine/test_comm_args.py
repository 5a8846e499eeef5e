"""A ``ctx.comm`` call given the wrong kind of argument names the call and what it got (``all_reduce([t])`` ended
in ``'list' object has no attribute 'detach'``)."""

from __future__ import annotations

import pytest
import torch

from distrepro.engine.comm_args import one_tensor, tensor_list
from distrepro.errors import CommError

pytestmark = pytest.mark.smoke


def test_a_list_where_one_tensor_goes_points_to_the_coalesced_call() -> None:
    t = torch.zeros(2)
    assert one_tensor("all_reduce", t) is t
    with pytest.raises(CommError, match=r"ctx.comm.all_reduce: expects one tensor, got a list; several tensors go to "
                       r"ctx.comm.all_reduce_coalesced"):  # fmt: skip
        one_tensor("all_reduce", [t])
    with pytest.raises(CommError, match=r"ctx.comm.broadcast: expects one tensor, got a float$"):
        one_tensor("broadcast", 1.0)


def test_a_list_call_takes_any_iterable_of_tensors_and_names_a_bad_item() -> None:
    a, b = torch.zeros(1), torch.ones(1)
    assert tensor_list("all_reduce_coalesced", (x for x in (a, b))) == [a, b]  # a generator, as grads_of may give
    with pytest.raises(CommError, match="got one tensor; pass \\[tensor\\]"):
        tensor_list("all_reduce_coalesced", a)
    with pytest.raises(CommError, match="item 1 of the list is a NoneType, not a tensor"):
        tensor_list("weighted_average", [a, None])
    with pytest.raises(CommError, match="expects a list of tensors, got an int"):
        tensor_list("weighted_average", 3)
