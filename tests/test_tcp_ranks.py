"""``benchmarks/tcp_ranks.py``: one all-reduce over 25 GbE as the ranks grow, across the profile's latency range."""

from __future__ import annotations

from benchmark_module import benchmark_module

from distrepro.safe_yaml import read_yaml_mapping
from distrepro.timing.timemodel import CommCostModel


def _ms(module, nodes: int, latency: float, size: int) -> float:  # type: ignore[no-untyped-def]
    profile = module.profile_at(nodes, latency, read_yaml_mapping(module.PROFILE))
    return CommCostModel(profile).collective("all_reduce", range(4 * nodes), size).seconds * 1e3


def test_a_copied_profile_has_the_nodes_and_latency_asked_for() -> None:
    module = benchmark_module("tcp_ranks")
    profile = module.profile_at(8, 60.0, read_yaml_mapping(module.PROFILE))
    assert profile.world_size == 32
    assert len(profile.nodes) == 8 and profile.network.inter_node.latency_us == 60.0


def test_a_large_call_grows_by_its_bandwidth_term_until_the_latency_outgrows_a_slice() -> None:
    """25 MiB from 8 to 128 GPUs: at 30 µs a slice covers each step (the bandwidth term's 2(p-1)/p: +13 %); at the
    range's 60 µs it no longer does at 128 ranks, so the call grows more; a 4 KB call is all latency."""
    module = benchmark_module("tcp_ranks")
    size = 25 * 1024 * 1024
    central = _ms(module, 32, 30.0, size) / _ms(module, 2, 30.0, size) - 1
    slow = _ms(module, 32, 60.0, size) / _ms(module, 2, 60.0, size) - 1
    assert 0.10 < central < 0.16 < slow
    assert _ms(module, 2, 60.0, 4096) > 1.8 * _ms(module, 2, 30.0, 4096)
    assert "| 26,214,400 | 60 µs |" in module.table([size], [60.0])
