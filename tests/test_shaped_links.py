"""``benchmarks/shaped_links.py``: real gloo traffic between tc-shaped network namespaces against the emulator.

The prediction side runs everywhere; the namespaces need root and iproute2 and are skipped with the reason where they
cannot be made. One quick real case (a two-node ring all-reduce through 200 Mbit/s NICs) runs where they can.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_module import benchmark_module

REPO = Path(__file__).resolve().parents[1]


def _module(name: str) -> ModuleType:
    return benchmark_module(name)


links = _module("shaped_links")
net = sys.modules["shaped_net"]
MIB4 = 4 * 2**20


def test_the_prediction_is_the_ring_formula_at_the_shaped_goodput() -> None:
    bandwidth = 100e6 / 8 * links.GOODPUT
    for p in (2, 4, 8):
        case = links.Case((1,) * p, (links.Op("ring", "all_reduce", MIB4),))
        predicted = links.predict(case, case.ops[0], 100.0, latency_s=0.0)
        assert predicted == pytest.approx(2 * (p - 1) / p * MIB4 / bandwidth, rel=1e-6)


def test_flows_through_one_nic_share_it() -> None:
    bandwidth = 100e6 / 8 * links.GOODPUT
    for m in (1, 2, 4):
        pairs = tuple((i, m + i) for i in range(m))
        case = links.Case((m, m), (links.Op("shared", "pairs", MIB4, pairs),))
        # a swap (receive posted first) runs both directions at once: m pairs share each direction, m·S/B
        assert links.predict(case, case.ops[0], 100.0, latency_s=0.0) == pytest.approx(m * MIB4 / bandwidth)


def test_swaps_only_runs_each_pair_exchange_in_both_orders() -> None:
    swaps = [op for case in links.cases(MIB4, swaps_only=True) for op in case.ops]
    assert {op.kind for op in swaps} == {"pairs"}
    assert sum(op.recv_first for op in swaps) == sum(not op.recv_first for op in swaps) == 5


def _namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout


@pytest.mark.distributed
def test_namespaces_links_and_cgroups_are_removed_even_when_the_body_fails() -> None:
    reason = net.unavailable_reason()
    if reason:
        pytest.skip(f"network namespaces cannot be made here: {reason}")
    quota = 0.5 if net.cgroup_cpu_available() else None
    with pytest.raises(RuntimeError, match="boom"), net.ShapedNetwork(2, 100.0, cpu_quota=quota) as shaped:
        made = list(shaped.namespaces)
        cgroup = shaped.cgroup_for(0)
        assert all(ns in _namespaces() for ns in made)
        raise RuntimeError("boom")
    assert not any(ns in _namespaces() for ns in made)
    assert cgroup is None or not cgroup.exists()
    bridges = subprocess.run(["ip", "link", "show", "type", "bridge"], capture_output=True, text=True).stdout
    assert f"drb{shaped.tag}" not in bridges


@pytest.mark.distributed
def test_a_shaped_two_node_ring_takes_about_what_the_emulator_says() -> None:
    reason = net.unavailable_reason()
    if reason:
        pytest.skip(f"network namespaces cannot be made here: {reason}")
    case = links.cases(MIB4, quick=True)[0]
    result = links.run_case(case, 200.0, reps=2, warmup=1)[0]
    measured = min(result["wall_s"])
    predicted = links.predict(case, case.ops[0], 200.0, latency_s=0.0)
    # the htb rate bounds it from below (nothing crosses faster than the shaped rate); gloo, TCP and two shared
    # cores may add time, but not a factor 2 on a 2-rank ring (BENCHMARKS.md: within 15 % on this machine)
    assert 0.9 * predicted <= measured <= 2.0 * predicted


def test_a_one_way_send_is_one_message() -> None:
    bandwidth = 100e6 / 8 * links.GOODPUT
    case = links.Case((1, 1), (links.Op("send", "send", MIB4, ((0, 1),)),))
    assert links.predict(case, case.ops[0], 100.0, latency_s=1e-4) == pytest.approx(1e-4 + MIB4 / bandwidth)
