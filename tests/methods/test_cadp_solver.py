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


def _textbook_alm(a: np.ndarray, c: np.ndarray, total: float, s) -> tuple:
    """Algorithm 1 as the solver computed it before its iterates' terms were shared: every quantity afresh."""
    import math

    av, cv = np.asarray(a, dtype=float), np.asarray(c, dtype=float)
    n = av.size
    t_ref = float(np.max(av * total / n + cv))
    alpha, gamma = av * total / t_ref, cv / t_ref
    y = np.full(n, 1.0 / n)
    lam, mu, eta = s.lambda0, s.mu0, s.eta0

    def lagrangian(v):
        t = (alpha * v + gamma) / mu
        top = float(t.max())
        resid = float(v.sum()) - 1.0
        lse = mu * (top + math.log(float(np.exp(t - top).sum())))
        return lse - mu * float(np.log(v).sum()) + lam * resid + 0.5 * s.rho * resid * resid

    def gradient(v):
        t = (alpha * v + gamma) / mu
        p = np.exp(t - t.max())
        p /= p.sum()
        return alpha * p - mu / v + lam + s.rho * (float(v.sum()) - 1.0)

    def direction(v, g):
        if s.direction == "gradient":
            return g
        t = (alpha * v + gamma) / mu
        p = np.exp(t - t.max())
        p /= p.sum()
        ap = alpha * p
        hess = (np.diag(alpha * ap) - np.outer(ap, ap)) / mu + np.diag(mu / (v * v)) + s.rho
        d = np.linalg.solve(hess, g)
        return d if float(d @ g) > 0 else g

    outer = inner_total = 0
    gnorm = math.inf
    while outer < s.max_outer:
        g = gradient(y)
        gnorm = float(np.linalg.norm(g))
        if gnorm <= s.eps and outer > 0:
            break
        value, step = lagrangian(y), eta
        for _ in range(s.max_inner):
            if gnorm <= s.eps:
                break
            step = min(eta, 2.0 * step)
            d = direction(y, g)
            slope = float(g @ d)
            while True:
                trial = y - step * d
                if np.all(trial > 0):
                    trial_value = lagrangian(trial)
                    if trial_value <= value - 1e-4 * step * slope:
                        break
                step *= 0.5
                if step < 1e-18:
                    trial, trial_value = y, value
                    break
            inner_total += 1
            if trial is y:
                break
            y, value = trial, trial_value
            g = gradient(y)
            gnorm = float(np.linalg.norm(g))
        lam += s.rho * (float(y.sum()) - 1.0)
        mu *= s.mu_decay
        eta *= s.eta_decay
        outer += 1
        if mu < s.mu_min:
            break
    return tuple(float(v) for v in y * total), outer, inner_total, gnorm


@pytest.mark.parametrize("direction", ["newton", "gradient"])
def test_shared_iterate_terms_give_the_textbook_floats_bit_for_bit(direction: str) -> None:
    """The solver computes each iterate's scaled times, softmax and sum once (and the norm as sqrt(g·g)); its
    shares, iteration counts and final gradient norm are exactly those of computing every term afresh."""
    settings = sv.AlmSettings(direction=direction, max_inner=3000 if direction == "newton" else 200, max_outer=12)
    for a, c, total in _instances(12 if direction == "newton" else 4, seed=7):
        got = sv.solve_alm_uncached(a, c, float(total), settings)
        assert (got.shares, got.outer_iterations, got.inner_iterations, got.grad_norm) == _textbook_alm(
            a, c, float(total), settings
        )


@pytest.mark.smoke
def test_the_direct_solve_is_numpys_solve_bit_for_bit_and_refuses_a_singular_matrix() -> None:
    """The Newton step calls np.linalg.solve's gufunc itself: the same floats, the same LinAlgError."""
    rng = np.random.default_rng(11)
    for n in (2, 4, 7, 16):
        m = rng.normal(size=(n, n)) + n * np.eye(n)
        b = rng.normal(size=n)
        assert sv._solve(m, b).tobytes() == np.linalg.solve(m, b).tobytes()
    with pytest.raises(np.linalg.LinAlgError):
        sv._solve(np.ones((3, 3)), np.ones(3))
