"""The emulated warm-up profile sums the clock's charges as warmup_charge gives them (inlined for speed only)."""

from __future__ import annotations

import math

import pytest

from distrepro.timing.warmup_profile import emulated_profile, emulated_speed, warmup_charge

pytestmark = pytest.mark.smoke


class _Job:
    """Charges that differ by rank, batch and step index, so a changed argument or order would show."""

    batch_sizes = (8, 0, 5)
    world_size = 3

    def compute_seconds(self, rank: int, n: int, step_index: int, at_s: float) -> float:
        return (rank + 1.1) * n / 7.0 + math.sin(step_index) / 3.0 + 1.0 + at_s


def test_the_speed_is_the_old_sum_of_warmup_charges_bitwise() -> None:
    job = _Job()
    for rank in (0, 2):
        for steps in (1, 3, 10):
            n = job.batch_sizes[rank]
            old = steps * n / sum(warmup_charge(job, rank, n, i) for i in range(steps))
            assert emulated_speed(job, rank, steps) == old
    profile = emulated_profile(job, 4)
    assert math.isnan(profile[1]) and profile[0] == emulated_speed(job, 0, 4) != profile[2]
    assert math.isnan(emulated_speed(job, 0, 0))
