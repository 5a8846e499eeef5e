"""The framework's costs (issue 33): each charged, with the right sign and scaling."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import pytest

from distrepro.hardware.workloads import load_workloads
from distrepro.timing import framework as fw


def test_expected_max_grows_with_p_and_is_one_without_jitter() -> None:
    values = [fw.expected_max_factor(p, 0.02) for p in (1, 2, 8, 64, 512)]
    assert values[0] == 1.0 and all(a < b for a, b in itertools.pairwise(values))
    # E[max of 2 normals] = 1/sqrt(pi) sigma; for a small sigma the lognormal is nearly normal
    assert values[1] - 1 == pytest.approx(0.02 / math.sqrt(math.pi), rel=0.02)
    assert fw.expected_max_factor(64, 0.0) == 1.0


def test_reducer_cost_is_charged_for_a_gpu_with_layers_and_scales_with_bytes_over_bandwidth() -> None:
    table = load_workloads()["transformer_base_wmt14_195tok"].layers
    t4 = fw.bucketed_step_overhead_s(SimpleNamespace(name="t4", kind="gpu"), table)
    a100 = fw.bucketed_step_overhead_s(SimpleNamespace(name="a100", kind="gpu"), table)
    copies = fw.BUCKET_PASSES * 4 * table.params
    assert t4 - a100 == pytest.approx(copies / 320e9 - copies / 1555e9)
    assert t4 > a100 > 0
    assert fw.bucketed_step_overhead_s(SimpleNamespace(name="t4", kind="gpu"), None) == 0.0
    assert fw.bucketed_step_overhead_s(SimpleNamespace(name="epyc", kind="cpu"), table) == 0.0


def test_ddp_step_overlaps_buckets_and_contention_lengthens_backward() -> None:
    """compute 1 s, backward 2/3; two buckets of 0.1 s ready at half and all of backward."""
    base = fw.ddp_step_s(1.0, 2 / 3, [(0.5, 0.1), (1.0, 0.1)], contention=0.0)
    assert base == pytest.approx(1.1)  # the last bucket after backward
    slowed = fw.ddp_step_s(1.0, 2 / 3, [(0.5, 0.1), (1.0, 0.1)], contention=0.1)
    assert slowed == pytest.approx(1.0 + 0.1 * 0.1 + 0.1)  # 0.1 s overlapped → backward + 10 ms
    assert fw.ddp_step_s(1.0, 2 / 3, [(0.5, 0.1)], overhead_s=0.05, contention=0.0) == pytest.approx(1.05)
