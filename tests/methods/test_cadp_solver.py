"""C-ADP's scheduling solver (methods/cadp/solver.py) against the exact water-filling oracle."""

from __future__ import annotations

import numpy as np
import pytest

from distrepro.plugins.registry import plugin_module

sv = plugin_module("cadp", "solver")


def _instances(count: int, seed: int = 0):
    """Random heterogeneous instances: speeds over 2.6 decades, per-round costs often zero."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(2, 13))
        speed = np.exp(rng.uniform(np.log(5.0), np.log(2000.0), n))
        cost = rng.uniform(0.0, 5.0, n) * (rng.random(n) < 0.7)
        yield 1.0 / speed, cost, int(rng.integers(10_000, 200_001))


@pytest.mark.smoke
def test_algorithm1_matches_the_water_filling_oracle_after_rounding() -> None:
    worst = 0.0
    for a, c, total in _instances(60):
        shares, relaxed = sv.schedule(a, c, total)
        oracle = sv.water_fill(a, c, total)
        assert sum(shares) == total
        assert min(shares) >= 0
        assert all(isinstance(x, int) for x in shares)
        gap = sv.makespan(a, c, shares) / oracle.makespan_s - 1.0
        assert relaxed.makespan_s / oracle.makespan_s - 1.0 < 1e-4  # the relaxation itself
        worst = max(worst, gap)
    assert worst <= 1e-3, worst


@pytest.mark.smoke
def test_oracle_equalises_finish_times_and_drops_devices_too_slow_to_sync() -> None:
    a = [1 / 1600] * 4 + [1 / 12, 1 / 12, 1 / 39, 1 / 22]  # the C-ADP cluster, ResNet-18 speeds
    sol = sv.water_fill(a, [0.0] * 8, 100_000)
    speeds = np.array([1600] * 4 + [12, 12, 39, 22], dtype=float)
    assert np.allclose(sol.shares, 100_000 * speeds / speeds.sum())
    assert sol.makespan_s == pytest.approx(100_000 / speeds.sum())
    # a device whose fixed cost alone exceeds everyone else's finish time gets nothing
    sol = sv.water_fill([1.0, 1.0], [0.0, 50.0], 10)
    assert sol.shares == pytest.approx((10.0, 0.0))
    assert sol.makespan_s == 50.0  # it still syncs every round


@pytest.mark.smoke
def test_rounding_keeps_the_total_and_repairs_bad_iterates() -> None:
    a, c = [1.0, 2.0, 4.0], [0.0, 0.0, 0.0]
    assert sum(sv.round_shares(a, c, [3.4, 1.7, 0.9], 6)) == 6
    over = sv.round_shares(a, c, [9.0, 9.0, 9.0], 7)  # infeasible: floors exceed the total
    assert sum(over) == 7 and min(over) >= 0
    neg = sv.round_shares(a, c, [-3.0, 5.2, 4.9], 10)
    assert sum(neg) == 10 and min(neg) >= 0
    # the greedy leftover goes where it finishes earliest: the fast device
    assert sv.round_shares(a, c, [0.0, 0.0, 0.0], 1) == (1, 0, 0)
    with pytest.raises(ValueError):
        sv.round_shares(a, c, [1, 1, 1], -1)
    with pytest.raises(ValueError, match="positive"):
        sv.schedule([1.0, 0.0], [0.0, 0.0], 10)


@pytest.mark.smoke
def test_rounding_gap_shrinks_with_S_asymptotic_optimality() -> None:
    """The paper's "optimal in the asymptotic sense": the rounded gap is O(1/S)."""
    a, c = [1 / 1600] * 4 + [1 / 12, 1 / 12, 1 / 39, 1 / 22], [0.8] * 8
    gaps = []
    for total in (100, 1_000, 10_000, 100_000):
        shares, _ = sv.schedule(a, c, total)
        gaps.append(sv.makespan(a, c, shares) / sv.water_fill(a, c, total).makespan_s - 1.0)
    assert gaps[-1] < 1e-3 and gaps[-1] <= gaps[0]


@pytest.mark.slow
def test_literal_gradient_steps_also_reach_the_oracle() -> None:
    """Line 6 taken literally (x ← x − η∇L, Armijo η): slow but as accurate."""
    settings = sv.AlmSettings(direction="gradient", max_inner=20_000)
    for a, c, total in _instances(3, seed=1):
        shares, _ = sv.schedule(a, c, total, settings)
        assert sum(shares) == total
        assert sv.makespan(a, c, shares) / sv.water_fill(a, c, total).makespan_s - 1.0 <= 1e-3


def _bits(solution) -> tuple:
    """Every float of a Solution as its hex (a one-ulp difference, or -0.0 against 0.0, shows), and its counts."""
    return (
        tuple(float(v).hex() for v in solution.shares),
        float(solution.makespan_s).hex(),
        solution.outer_iterations,
        solution.inner_iterations,
        float(solution.grad_norm).hex(),
    )


@pytest.mark.smoke
def test_memoised_solve_is_the_uncached_solve_bit_for_bit_and_keyed_on_exact_inputs() -> None:
    sv._SOLVED.clear()
    for a, c, total in _instances(8, seed=3):
        fresh = _bits(sv.solve_alm_uncached(a, c, float(total)))
        first = sv.solve_alm(list(a), list(c), float(total))
        assert _bits(first) == fresh
        assert sv.solve_alm(a, c, float(total)) is first  # the repeat is served from the memo
        # one ulp off in a single a_j is another problem: solved afresh, not served the neighbour's answer
        nudged = a.copy()
        nudged[0] = np.nextafter(nudged[0], 1.0)
        served = sv.solve_alm(nudged, c, float(total))
        assert served is not first
        assert _bits(served) == _bits(sv.solve_alm_uncached(nudged, c, float(total)))
        other = sv.AlmSettings(direction="newton", rho=np.nextafter(10.0, 11.0))
        assert sv.solve_alm(a, c, float(total), other) is not first
    assert len(sv._SOLVED) == 8 * 3
