"""Where a DDP implementation cuts its buckets (:mod:`distrepro.timing.ddp_buckets`), as the validation prices them.

PyTorch's rule (a 1 MiB first bucket, then 25 MiB, the remainder last) and apex's (every bucket at ``message_size``
elements of the gradients' own type) give the plans their code gives; a cap at least the model is one bucket,
ready only when backward ends, so nothing of its all-reduce hides behind backward."""

from __future__ import annotations

import math

import pytest

from distrepro.timing.ddp_buckets import Bucketing, bytes_per_element

pytestmark = pytest.mark.smoke

MIB = 1024.0 * 1024.0


def test_pytorchs_caps_give_a_small_first_bucket_then_full_ones_and_the_remainder_last() -> None:
    torch_ddp = Bucketing(25 * MIB, 1 * MIB, "PyTorch defaults")
    plan = torch_ddp.even_plan(60 * MIB)
    assert [size / MIB for _, size in plan] == pytest.approx([1, 25, 25, 9])
    assert [ready for ready, _ in plan] == pytest.approx([1 / 60, 26 / 60, 51 / 60, 1.0])
    assert sum(size for _, size in plan) == pytest.approx(60 * MIB)


def test_apexs_message_size_counts_elements_of_the_gradients_type() -> None:
    fp16 = Bucketing.of_elements(1e7, 2.0, "apex default")
    fp32 = Bucketing.of_elements(1e7, 4.0, "apex default")
    assert fp16.cap_bytes == fp16.first_cap_bytes == 2e7 and fp32.cap_bytes == 4e7
    assert [size for _, size in fp32.even_plan(1e8)] == pytest.approx([4e7, 4e7, 2e7])


def test_a_cap_above_the_model_is_one_bucket_ready_when_backward_ends() -> None:
    one = Bucketing.of_elements(2.5e8, 2.0, "DLPerf's BERT: message_size 250,000,000")
    assert one.even_plan(2.2e8) == [(1.0, 2.2e8)]
    assert Bucketing(math.inf, math.inf, "bucket_cap_mb = device memory").even_plan(1.3e9) == [(1.0, 1.3e9)]


def test_caps_in_a_layer_tables_units_scale_with_its_bytes() -> None:
    assert Bucketing(4e7, 4e7, "x").in_units(0.5) == (8e7, 8e7)


def test_an_element_is_two_or_four_bytes_and_anything_else_is_an_error() -> None:
    assert bytes_per_element(2.202e8, 1.101e8) == 2.0 and bytes_per_element(4.404e8, 1.101e8) == 4.0
    with pytest.raises(ValueError, match="neither FP16 nor FP32"):
        bytes_per_element(3.3e8, 1.101e8)


def test_a_cap_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Bucketing(0.0, 1.0, "x")
