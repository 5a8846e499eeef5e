"""The emulator's validated error in a timing verdict (distrepro.claims.model_interval): a model interval beside the
seed interval, and a PASS or FAIL that does not hold at every corner of the arms' error bands becomes INCONCLUSIVE."""

from __future__ import annotations

from typing import Any

import pytest
from test_verdicts import Table, judge, spec

from distrepro.claims import model_interval as mi
from distrepro.claims.verdicts import judge_values
from distrepro.hardware.emulator_error import ErrorBand, arm_band, bands_path, interconnect, workload_class
from distrepro.hardware.profiles import load_profile
from distrepro.safe_yaml import load_yaml

pytestmark = pytest.mark.smoke

SPEEDUP = {"id": "s", "kind": "speedup", "arm": "fast", "claimed": 2.0, "accept": {"rel_tolerance": 0.1}}


def _table(ratio: float) -> Table:
    """Five paired seeds whose base/fast ratio is ``ratio`` to within ±0.1 %: a seed interval of almost no width."""
    t = Table()
    base = {s: 10.0 + s for s in range(5)}
    t.arm("base", "final/emulated_s", base)
    t.arm("fast", "final/emulated_s", {s: v / (ratio * (1 + 0.001 * (s - 2))) for s, v in base.items()})
    return t


def _judge(paper: str = "handpaper") -> mi.Judge:
    return lambda claim, arms: judge_values(claim, arms, paper)


def _band(rel: float) -> ErrorBand:
    return ErrorBand(rel, 0.0, f"a hand-set {rel:.0%} band", True)


def test_a_fail_inside_the_emulators_error_is_inconclusive_and_says_why() -> None:
    s = spec(SPEEDUP, min_seeds=5)
    v = judge(s, _table(1.7))  # band [1.8, 2.2]: 1.7 with a zero-width seed interval is a firm FAIL on the seeds
    assert v.verdict == "FAIL"
    result = mi.check(s.claims[0], v, {"fast": _band(0.10), "base": _band(0.10)}, _judge())
    assert result is not None and not result.holds
    low, high = result.interval  # 1.7 x [0.9/1.1, 1.1/0.9]
    assert low == pytest.approx(1.7 * 0.9 / 1.1, rel=2e-3) and high == pytest.approx(1.7 * 1.1 / 0.9, rel=2e-3)
    mi.apply(s.claims[0], v, result, "handpaper")
    assert v.verdict == "INCONCLUSIVE" and v.within_model_error
    assert "within the emulator's validated error (± up to 10.0%" in v.reason and "model interval [" in v.reason
    assert "distrepro calibrate" in v.reason and v.reason.startswith("FAIL on the seeds")
    others = [k for k in result.corner_verdicts if k != "FAIL"]  # the corners that overturn it, named with counts
    assert others and f"the bands' {len(result.corner_verdicts)} corners" in v.reason
    assert all(f"{kind} at {others.count(kind)}" in v.reason for kind in set(others))
    assert "'fast' ±10.0% (a hand-set 10% band)" in v.model_basis  # each arm's band, for the claim's details
    assert v.model_interval == result.interval and v.model_error == {"fast": 0.10, "base": 0.10}


def test_a_fail_beyond_the_emulators_error_stays_a_fail_with_its_model_interval() -> None:
    s = spec(SPEEDUP, min_seeds=5)
    v = judge(s, _table(1.2))  # 1.2 x 1.1/0.9 = 1.47 < 1.8: no corner reaches the band
    result = mi.check(s.claims[0], v, {"fast": _band(0.10), "base": _band(0.10)}, _judge())
    assert result is not None and result.holds and set(result.corner_verdicts) == {"FAIL"}
    mi.apply(s.claims[0], v, result, "handpaper")
    assert v.verdict == "FAIL" and not v.within_model_error
    assert v.model_interval is not None and v.model_interval[1] < 1.8


def test_a_pass_near_the_band_edge_is_inconclusive_but_a_central_one_stands() -> None:
    s = spec(SPEEDUP, min_seeds=5)
    edge = judge(s, _table(1.85))
    assert edge.verdict == "PASS"
    mi.apply(s.claims[0], edge, mi.check(s.claims[0], edge, {"fast": _band(0.05)}, _judge()), "handpaper")
    assert edge.verdict == "INCONCLUSIVE"  # 1.85 / 1.05 = 1.76 falls out of [1.8, 2.2]
    central = judge(s, _table(2.0))
    mi.apply(s.claims[0], central, mi.check(s.claims[0], central, {"fast": _band(0.05)}, _judge()), "handpaper")
    assert central.verdict == "PASS" and central.model_interval is not None


def test_only_values_read_off_the_emulated_clock_carry_the_band() -> None:
    speedup = spec(SPEEDUP).claims[0]
    assert mi.emulated_quantity(speedup) == "time"
    wall = spec({**SPEEDUP, "clock": "wall"}).claims[0]
    assert mi.emulated_quantity(wall) is None
    acc = {"id": "a", "kind": "non_inferiority", "arm": "fast", "metric": "final/val_accuracy", "direction": "max",
           "margin": 0.01}  # fmt: skip
    assert mi.emulated_quantity(spec(acc).claims[0]) is None
    flops = {**acc, "metric": "final/useful_flops_per_emulated_s"}
    assert mi.emulated_quantity(spec(flops).claims[0]) == "rate"


def test_an_unbounded_band_never_leaves_a_firm_verdict() -> None:
    s = spec(SPEEDUP, min_seeds=5)
    v = judge(s, _table(1.2))
    result = mi.check(s.claims[0], v, {"fast": _band(0.97)}, _judge())
    assert result is not None and not result.holds and result.interval == (float("-inf"), float("inf"))


# ------------------------------------------------------------------ which band an arm carries


def _each_source_once() -> float:
    """The emulator's error with each validation source counted once, as the committed band file says: it moves
    whenever a source is added, so the tests read it rather than copy it."""
    path = bands_path()
    return float(load_yaml(path.read_text(encoding="utf-8"), path)["each_source_once"]["median_abs"])


def _decentdp(arm_method: str, params: dict[str, Any]) -> ErrorBand:
    profile = load_profile("a40-25gbe-16")
    exchange = "neighbour" if arm_method == "decentdp" else "all_reduce"
    return arm_band("decentdp", profile, arm_method, exchange, params)


def _cell(cell_id: str) -> dict[str, Any]:
    """A Fig. 6 cell of the committed band file: its error moves with the emulator, so the tests read it."""
    path = bands_path()
    cells = load_yaml(path.read_text(encoding="utf-8"), path)["cells"]["decentdp"]
    return next(cell for cell in cells if cell["id"] == cell_id)


def test_a_papers_own_cells_give_its_arms_their_own_out_of_sample_error() -> None:
    aer = _decentdp("decentdp", {"topology": "alternating-exp-ring"})
    allreduce = _decentdp("ar_sgd", {})
    aer_cell, allreduce_cell = _cell("decentdp-a40-16-aer"), _cell("decentdp-a40-16-allreduce")
    assert aer.rel == pytest.approx(abs(aer_cell["error"])) and aer.bias == pytest.approx(aer_cell["signed"])
    assert aer.bias < 0 and "decentdp-a40-16-aer" in aer.basis  # predicted too slow, as the band file says
    assert allreduce.rel == pytest.approx(abs(allreduce_cell["error"])) and allreduce.rel != aer.rel
    assert "decentdp-a40-16-allreduce" in allreduce.basis
    # another topology on the same profile is not the AER cell: it takes its class (one source: not narrower)
    ring = _decentdp("decentdp", {"topology": "ring"})
    assert "cell" not in ring.basis and not ring.covered and ring.rel >= _each_source_once()


def test_the_class_follows_the_profiles_links_and_the_methods_exchange() -> None:
    a40 = load_profile("a40-25gbe-16")  # 25 GbE over TCP, 30 us
    assert interconnect(a40) == "ethernet" and workload_class(a40, "all_reduce") == "ddp_allreduce_inter_node"
    a100 = load_profile("a100-ib-16")
    assert interconnect(a100) == "infiniband"
    cpu = load_profile("cadp-ijcai25")
    band = arm_band("cadp", cpu, "cadp", "parameter_server", {})
    assert not band.covered and "not covered" in band.basis and band.rel == pytest.approx(_each_source_once())


def test_a_verdict_overturned_with_its_statistic_outside_the_band_says_which_corners_did_it() -> None:
    """A FAIL whose model interval lies wholly outside the band can still be overturned: at a corner the scaled
    seed interval reaches the band's edge. The reason names that corner's verdict, not only the interval."""
    s = spec(SPEEDUP, min_seeds=5)
    v = judge(s, _table(1.55))  # band [1.8, 2.2]; 1.55 x 1.1/0.9 = 1.89 is inside it: that corner is no FAIL
    result = mi.check(s.claims[0], v, {"fast": _band(0.10), "base": _band(0.10)}, _judge())
    assert result is not None and not result.holds
    mi.apply(s.claims[0], v, result, "handpaper")
    assert v.verdict == "INCONCLUSIVE"
    overturned = sorted({k for k in result.corner_verdicts if k != "FAIL"})
    assert overturned and all(f"{kind} at " in v.reason for kind in overturned)


def test_a_band_too_wide_to_bound_a_time_says_so() -> None:
    s = spec(SPEEDUP, min_seeds=5)
    v = judge(s, _table(1.2))
    result = mi.check(s.claims[0], v, {"fast": _band(0.96)}, _judge())
    assert result is not None and result.corner_verdicts == () and not result.holds
    mi.apply(s.claims[0], v, result, "handpaper")
    assert v.verdict == "INCONCLUSIVE" and "bounds no time" in v.reason


def test_a_fail_whose_corners_miss_the_band_on_both_sides_is_inconclusive() -> None:
    """A narrow two-sided band inside a wide error: every corner FAILs, some short of the band and some beyond it,
    and between them (the statistic moves continuously) the claim holds, so the FAIL decides nothing."""
    narrow = {"id": "s", "kind": "speedup", "arm": "fast", "claimed": 2.0, "accept": {"rel_tolerance": 0.02}}
    s = spec(narrow, min_seeds=5)
    v = judge(s, _table(1.8))  # band [1.96, 2.04]: 1.8 falls short on the seeds
    assert v.verdict == "FAIL"
    result = mi.check(s.claims[0], v, {"fast": _band(0.5), "base": _band(0.02)}, _judge())
    # corners: 1.8 x 0.98/1.5 = 1.18 .. 1.8 x 1.02/0.5 = 3.67: FAIL short at two, FAIL beyond at two
    assert result is not None and set(result.corner_verdicts) == {"FAIL"}
    assert set(result.corner_misses) == {"falls short of the claim", "exceeds the claim"} and not result.holds
    mi.apply(s.claims[0], v, result, "handpaper")
    assert v.verdict == "INCONCLUSIVE" and v.within_model_error
    assert "FAIL on both sides of the band (exceeds the claim at 2, falls short of the claim at 2)" in v.reason
    # a wide error that stays on one side keeps the FAIL: corners all short of the band
    low = judge(s, _table(1.2))
    one_side = mi.check(s.claims[0], low, {"fast": _band(0.2), "base": _band(0.02)}, _judge())
    assert one_side is not None and one_side.holds and set(one_side.corner_misses) == {"falls short of the claim"}
