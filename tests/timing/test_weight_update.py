"""The optimizer's weight update and gradient accumulation (issue 44, round 7): priced from its bytes and kernels,
and charged by the difference in updates per micro-batch between a point and its 1-GPU row."""

from __future__ import annotations

import pytest

from distrepro.timing import weight_update as wu
from distrepro.timing.framework import KERNEL_S

# GNMT's FP32 update as counted from its code: 88 bytes and 10 kernels per parameter tensor
GNMT_FP32 = wu.WeightUpdate(bytes_per_param=88, kernels_per_tensor=10, source="test")


@pytest.mark.smoke
def test_update_seconds_by_hand() -> None:
    # 160.7 M parameters x 88 B = 14.14 GB at 0.8 x 1,555 GB/s = 11.37 ms, plus 44 x 10 kernels x 2.5 us = 1.10 ms
    seconds = wu.update_seconds(GNMT_FP32, 160.7e6, 44, 1555e9)
    assert seconds == pytest.approx(160.7e6 * 88 / (0.8 * 1555e9) + 440 * 2.5e-6)
    assert seconds == pytest.approx(12.47e-3, abs=0.01e-3)
    assert KERNEL_S == 2.5e-6 and wu.ETA_MEM == 0.8
    # a V100 (900 GB/s) pays 19.64 + 1.10 ms
    assert wu.update_seconds(GNMT_FP32, 160.7e6, 44, 900e9) == pytest.approx(20.74e-3, abs=0.01e-3)


@pytest.mark.smoke
def test_accumulation_delta_charges_what_the_row_amortised() -> None:
    # the 1-GPU row updates every 8 micro-batches, the 8-GPU point every one: 7/8 of an update more per micro-batch
    assert wu.accumulation_delta_s(0.016, 1, 8) == pytest.approx(0.014)
    assert wu.accumulation_delta_s(0.016, 2, 8) == pytest.approx(0.006)  # 4 GPUs: 1/2 - 1/8
    assert wu.accumulation_delta_s(0.016, 8, 8) == 0.0
    assert wu.accumulation_delta_s(0.016, 8, 1) < 0  # a point accumulating more than its row is cheaper
    with pytest.raises(ValueError, match="at least 1"):
        wu.accumulation_delta_s(0.016, 0, 8)
    with pytest.raises(ValueError, match="positive"):
        wu.update_seconds(GNMT_FP32, 1e6, 1, 0.0)
