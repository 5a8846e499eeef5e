"""C-ADP with an asynchronous PS receive and heterogeneous per-device round costs (issue 13 item 4).

The server charge with pushes taken as they arrive is checked by hand; the solver's c_j is per round (a
round is ``round_epochs`` passes over the shares), so heterogeneous c_j move data off slow-link devices; the
analytical re-timing agrees with the engine for the async arm.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sensitivity_setups import TINY_PROFILE, _config

from distrepro.api.method import ClusterView, DeviceView
from distrepro.config.run_config import validate_config
from distrepro.engine.inprocess import InProcessEngine
from distrepro.hardware.profiles import load_profile
from distrepro.job.resolve import build_job
from distrepro.plugins.registry import get_method
from distrepro.sensitivity.analytic import simulate
from distrepro.sensitivity.probe import Prober
from distrepro.timing.timemodel import CommCostModel


def _tiny(tmp_path: Path) -> str:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_PROFILE, sort_keys=False))
    return str(path)


def test_async_receive_charge_by_hand(tmp_path: Path) -> None:
    """Ranks 0, 1 (GPUs, server path 1 GB/s, 50 us) and 2 (CPU, NIC 0.1 GB/s, 100 us); server 1 GB/s, 50 us.
    S = 1e6 bytes. Pushes: GPU 50us + 1 ms, CPU 100us + 10 ms; the server takes 1 ms per push in arrival order."""
    cost = CommCostModel(load_profile(_tiny(tmp_path)))
    s, a = 1e6, [0.0, 0.002, 0.5]
    gpu, cpu, per, lat = 50e-6 + 1e-3, 100e-6 + 1e-2, 1e-3, 50e-6
    server = max(max(0.0 + lat, -1) + per, 0.002 + lat) + per  # two GPU pushes, back to back or not
    server = max(server, 0.5 + lat) + per
    ready = max(0.0 + gpu, 0.002 + gpu, 0.5 + cpu, server)
    pull = max(gpu, cpu, lat + 3 * per)
    assert cost.parameter_server_async([0, 1, 2], s, a) == pytest.approx(ready + pull - 0.5, rel=1e-12)
    # all at once it is no cheaper than the collective charge's halves added up
    assert cost.parameter_server_async([0, 1, 2], s, [0.0] * 3) >= cost.parameter_server([0, 1, 2], s) - 1e-12


def test_heterogeneous_round_costs_move_data_off_slow_links() -> None:
    cls = get_method("cadp").cls
    devices = tuple(DeviceView(r, f"d{r}", "gpu", 100.0) for r in range(2))
    view = ClusterView(2, devices, 1000, (8, 8))
    same = cls.allocate(cls.Params(solver="water_fill", speeds="declared", round_epochs=2), view)
    assert same.batch_sizes == (1000, 1000)  # equal speeds, no costs: equal rounds
    # c = (0, 4 s) per round of 2 passes: device 1 needs 2 s less compute per pass, i.e. 200 fewer samples
    params = cls.Params(solver="water_fill", speeds="declared", round_epochs=2, round_cost_s=[0.0, 4.0])
    alloc = cls.allocate(params, view)
    assert alloc.batch_sizes == (1200, 800)


def test_analytical_time_of_the_async_ps_equals_the_engines(tmp_path: Path) -> None:
    params = {"micro_batch": [16, 16, 2], "round_epochs": 1, "ps_receive": "async", "round_cost_s": [0.0, 0.0, 0.3]}
    job = build_job(validate_config(_config(_tiny(tmp_path), "cadp", params)), 1)
    result = InProcessEngine().run(job)
    assert simulate(job, Prober(job)).emulated_s == pytest.approx(result.emulated_s, rel=1e-12)
    collective = build_job(validate_config(_config(_tiny(tmp_path), "cadp", {**params, "ps_receive": "collective"})), 1)
    assert result.emulated_s != InProcessEngine().run(collective).emulated_s  # the receive mode is charged
