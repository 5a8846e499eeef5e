"""Smoke: the decentdp and sgp plugins train on the in-process engine and one Fig. 6 cell is timed."""

from __future__ import annotations

import pytest

from suite.registry import plugin_module

pytestmark = pytest.mark.smoke


def test_one_fig6_cell_runs_and_decentralized_beats_allreduce_on_25gbe() -> None:
    fig6 = plugin_module("decentdp", "fig6")
    aer, _ = fig6.run_cell("a40-25gbe", 8, "decent-aer", 4)
    ar, _ = fig6.run_cell("a40-25gbe", 8, "allreduce", 4)
    assert aer > 0 and ar > 0
    assert aer < ar  # overlap and intra-node rounds: the emulator's prediction, not a tuned value


def test_sgp_out_peer_walks_the_exponential_graph() -> None:
    sgp = plugin_module("sgp", "method")
    assert [sgp.out_peer(0, 8, k) for k in range(4)] == [1, 2, 4, 1]
    assert sgp.out_peer(7, 8, 2) == 3
