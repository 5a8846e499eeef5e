"""The spread of length-bucketed batches and the expected slowest of p ranks (distrepro/timing/batch_spread.py)."""

from __future__ import annotations

import math

import pytest

from distrepro.timing import batch_spread as bs
from distrepro.timing import framework as fw


def _spec(max_tokens: int = 10240, **kw: float) -> bs.LengthBucketing:
    figures = dict(
        batch_multiple=8,
        mean_length=29.5,
        length_cv=0.6,
        length_ratio=1.036,
        ratio_variance=6.8,
        chars_per_token=5.3,
        ratio_cap=1.5,
        source_cost=168.0,
        target_cost=233.8,
        attention_cost=0.0234,
    )
    figures.update(kw)
    return bs.LengthBucketing(max_tokens=max_tokens, **figures)  # type: ignore[arg-type]


@pytest.mark.smoke
def test_batch_count_follows_make_batches() -> None:
    spec = _spec(max_tokens=1000)
    assert bs.batch_count(spec, 30) == 32  # 1000 // 30 = 33, rounded down to a multiple of 8
    assert bs.batch_count(spec, 200) == 5  # fewer than 8 fit: kept whole
    assert bs.batch_count(spec, 2000) == 1


@pytest.mark.smoke
def test_batch_work_by_hand() -> None:
    spec = _spec(max_tokens=1000, attention_cost=0.5)
    # source 20, target 30: 1000 // 30 = 33 -> 32 pairs; each 168·20 + 233.8·30 + 0.5·(400 + 900 + 600)
    assert bs.batch_work(spec, 20, 30) == pytest.approx(32 * (3360 + 7014 + 950))


@pytest.mark.smoke
def test_two_valued_work_without_jitter_is_the_closed_form() -> None:
    # X = 0.9 or 1.1, equally likely: the larger of two is 1.1 with probability 3/4
    assert bs.expected_max([0.9, 1.1], [0.5, 0.5], 2, 0.0) == pytest.approx(0.75 * 1.1 + 0.25 * 0.9)
    assert bs.expected_max([0.9, 1.1], [0.5, 0.5], 1, 0.02) == 1.0


def test_one_valued_work_with_jitter_is_the_jitter_alone() -> None:
    for p in (2, 8, 16):
        assert bs.expected_max([1.0], [1.0], p, 0.02) == pytest.approx(fw.expected_max_factor(p, 0.02), abs=1e-5)


def test_two_valued_work_with_jitter_lies_between_its_parts() -> None:
    both = bs.expected_max([0.9, 1.1], [0.5, 0.5], 8, 0.02)
    assert max(1.0 + 0.1 * (1 - 0.5**8), fw.expected_max_factor(8, 0.02)) < both < 1.1 * fw.expected_max_factor(8)


def test_wmt14_batches_spread_about_five_percent_and_grow_with_p() -> None:
    spec = _spec()
    assert 0.04 < bs.work_cv(spec) < 0.06
    factors = [bs.slowest_factor(spec, p, fw.STEP_CV) for p in (1, 4, 8, 16)]
    assert factors[0] == 1.0
    assert factors == sorted(factors)
    # above the jitter alone at every p, below what the widest batch would cost every step
    works, _ = bs.work_distribution(spec)
    for p, f in zip((4, 8, 16), factors[1:], strict=True):
        assert fw.expected_max_factor(p) < f < max(works) * fw.expected_max_factor(p)


def test_no_ratio_spread_leaves_only_the_rounding() -> None:
    narrow = _spec(ratio_variance=1e-6, length_ratio=1.0)
    assert bs.work_cv(narrow) < bs.work_cv(_spec())
    assert math.isfinite(bs.slowest_factor(narrow, 8, fw.STEP_CV))
