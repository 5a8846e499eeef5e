"""Smoke: the decentdp and sgp plugins train on the in-process engine and one Fig. 6 cell is timed."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrepro.plugins.registry import plugin_module
from distrepro.reproduction.report_context import plugin_context

pytestmark = pytest.mark.smoke


def test_one_fig6_cell_runs_and_decentralized_beats_allreduce_on_25gbe(tmp_path: Path) -> None:
    fig6 = plugin_module("decentdp", "fig6")
    ctx = plugin_context(tmp_path, "proxy")  # the harness's side of the products hook: it trains the cells
    aer, _ = fig6.run_cell(ctx, "a40-25gbe", 8, "decent-aer")
    ar, _ = fig6.run_cell(ctx, "a40-25gbe", 8, "allreduce")
    assert aer > 0 and ar > 0
    assert aer < ar  # overlap and intra-node rounds: the emulator's prediction, not a tuned value


def test_sgp_out_peer_walks_the_exponential_graph() -> None:
    sgp = plugin_module("sgp", "method")
    assert [sgp.out_peer(0, 8, k) for k in range(4)] == [1, 2, 4, 1]
    assert sgp.out_peer(7, 8, 2) == 3


def test_aer_on_one_node_is_skipped_with_a_reason() -> None:
    from distrepro.hardware.cluster_layout import cluster_layout
    from distrepro.hardware.profiles import load_profile
    from distrepro.plugins.registry import get_method

    plugin = get_method("decentdp")
    aer = plugin.cls(plugin.cls.Params())
    assert "power-of-two number of nodes" in (aer.skip(cluster_layout(load_profile("homogeneous-4"))) or "")
    assert aer.skip(cluster_layout(load_profile("a40-25gbe-16"))) is None
    ring = plugin.cls(plugin.cls.Params(topology="ring"))
    assert ring.skip(cluster_layout(load_profile("homogeneous-4"))) is None


def test_the_engine_refuses_aer_on_one_node_before_training(mlflow_uri: str) -> None:
    from distrepro.config.run_config import validate_config
    from distrepro.orchestration.campaign import run_campaign

    cfg = validate_config(
        {
            "method": "decentdp",
            "profile": "homogeneous-4",
            "dataset": {"name": "synthetic", "params": {"train_size": 64, "test_size": 32, "image_size": 8}},
            "budget": {"steps": 2},
            "seeds": [0],
            "torch_threads": 1,
        }
    )
    with pytest.raises(Exception, match="cannot run here: the alternating exponential ring"):
        run_campaign(cfg, show_progress=False, tracking_uri=mlflow_uri)


def test_each_arm_is_charged_its_own_loops_host_syncs() -> None:
    """Decent-DP's hooks step each bucket's optimizer (a host sync per bucket), the All-Reduce baseline syncs once
    a step: a Fig. 6 cell's job charges the profile's ``host_sync_ms`` of its own loop."""
    from distrepro.config.run_config import validate_config
    from distrepro.hardware.profiles import load_profile
    from distrepro.job.resolve import build_job

    fig6 = plugin_module("decentdp", "fig6")
    declared = load_profile("a40-25gbe-32").device(0).host_sync_ms[fig6.WORKLOAD]
    charged = {
        method: build_job(validate_config(fig6.cell_config("a40-25gbe", 32, method, steps=2)), 0).compute.sync_s(5)
        for method in ("decent-aer", "allreduce")
    }
    assert charged == {"decent-aer": declared["per_bucket"] / 1e3, "allreduce": declared["per_step"] / 1e3}
    assert charged["decent-aer"] > charged["allreduce"] > 0
