"""The ``sgp`` plugin's push-sum step on a tiny case computed by hand (``level: device``: every rank a vertex; and
``level: node``, the reference's default with several GPUs per node).

Four ranks each hold one scalar parameter ``x_i`` and see the gradient ``g_i`` of ``g_i * x``; the optimizer
is plain SGD with learning rate 1, so one step is ``x_i <- x_i - g_i`` followed by the push:
``x_i <- (x_i + x_{i - 2^r}) / 2`` with ``r = k mod log2 n``. The push-sum weights stay 1 only because every
rank has exactly one in-neighbour at every step; that is checked separately, as the condition under which the
plugin may skip the de-biasing division.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from distrepro.api.method import ClusterLayout
from distrepro.api.optimizer_config import OptimizerConfig
from distrepro.engine.clock import VirtualClock
from distrepro.engine.inprocess.comm import Fabric
from distrepro.engine.inprocess.scheduler import Scheduler
from distrepro.hardware.profiles import load_profile
from distrepro.plugins.registry import get_method, plugin_module
from distrepro.timing.timemodel import CommCostModel
from distrepro.training.optimizers import build_optimizer

sgp = plugin_module("sgp", "method")
WORLD = 4
START = [0.0, 1.0, 2.0, 3.0]
GRAD = [1.0, -1.0, 2.0, 0.0]


class _Ctx:
    """The parts of a WorkerContext SGP uses: one scalar parameter whose gradient is ``GRAD[rank]``."""

    def __init__(self, rank: int, comm: Any, clock: VirtualClock) -> None:
        self.rank, self.world_size, self.comm, self.clock = rank, WORLD, comm, clock
        self.model = nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            self.model.weight.fill_(START[rank])
        self.cluster = ClusterLayout(WORLD, (0, 0, 1, 1), ("n0", "n1"))
        self.lr = None

    def build_optimizer(self, params: Any, default: OptimizerConfig) -> torch.optim.Optimizer:
        return build_optimizer(params, OptimizerConfig(name="sgd", lr=1.0))

    def forward_backward(self, _batch: Any) -> float:
        self.model.zero_grad(set_to_none=True)
        loss = (self.model.weight * GRAD[self.rank]).sum()
        loss.backward()
        self.clock.compute(1e-3)
        return float(loss.detach())


def run_sgp(tmp_path: Path, steps: int, level: str = "device") -> list[float]:
    profile_file = tmp_path / "two-by-two.yaml"
    device = '{name: g, kind: gpu, count: 2, memory_gib: 16, effective_flops_per_s: 1.0e12, source: "[E] test"}'
    nodes = "".join(f"  - name: n{i}\n    devices:\n      - {device}\n" for i in range(2))
    link = '{latency_us: 10, bandwidth_gbytes_per_s: 1, source: "[E] test"}'
    profile_file.write_text(
        f"schema_version: 1\nname: two-by-two\ndescription: test\nnodes:\n{nodes}"
        f"network:\n  intra_node: {link}\n  inter_node: {link}\n",
        encoding="utf-8",
    )
    clocks = [VirtualClock(r) for r in range(WORLD)]
    sched = Scheduler(clocks)
    fabric = Fabric(sched, CommCostModel(load_profile(profile_file)))
    plugin = get_method("sgp")
    out: dict[int, float] = {}

    def target(rank: int) -> Any:
        def go() -> None:
            method = plugin.cls(plugin.cls.Params(level=level))
            ctx = _Ctx(rank, fabric.comms[rank], clocks[rank])
            method.setup(ctx)  # type: ignore[arg-type]
            for _ in range(steps):
                method.train_step(ctx, None)  # type: ignore[arg-type]
            out[rank] = float(ctx.model.weight.item())

        return go

    sched.run([target(r) for r in range(WORLD)])
    return [out[r] for r in range(WORLD)]


def test_one_push_by_hand(tmp_path: Path) -> None:
    # SGD: x - g = [-1, 2, 0, 3]; step 0 pushes to i+1, so rank i receives from i-1:
    # [(-1 + 3)/2, (2 - 1)/2, (0 + 2)/2, (3 + 0)/2]
    assert run_sgp(tmp_path, 1) == pytest.approx([1.0, 0.5, 1.0, 1.5])


def test_two_pushes_by_hand(tmp_path: Path) -> None:
    # step 1 from [1, 0.5, 1, 1.5]: SGD gives [0, 1.5, -1, 1.5]; peers at distance 2: rank i receives from i-2:
    # [(0 - 1)/2, (1.5 + 1.5)/2, (-1 + 0)/2, (1.5 + 1.5)/2]
    assert run_sgp(tmp_path, 2) == pytest.approx([-0.5, 1.5, -0.5, 1.5])


def test_node_level_gossips_between_node_leaders_by_hand(tmp_path: Path) -> None:
    """The reference with 2 GPUs per node: gradients averaged inside each node ([0, 0] and [1, 1]), SGD from
    [0, 1, 2, 3] gives [0, 1, 1, 2]; leaders 0 and 2 swap (2 vertices: peer at distance 1) and average,
    (0 + 1)/2 = 0.5, then broadcast it to their node. Step 2 from 0.5: [0.5, 0.5, -0.5, -0.5] -> 0."""
    assert run_sgp(tmp_path, 1, "node") == pytest.approx([0.5] * 4)
    assert run_sgp(tmp_path, 2, "node") == pytest.approx([0.0] * 4)


def test_the_push_keeps_the_average_step_of_sgd(tmp_path: Path) -> None:
    # each push is doubly stochastic, so the mean moves exactly as one SGD step on the mean gradient per step
    steps = 3
    mean = sum(START) / WORLD - steps * sum(GRAD) / WORLD
    assert sum(run_sgp(tmp_path, steps)) / WORLD == pytest.approx(mean)


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32])
def test_every_rank_has_one_in_neighbour_so_push_sum_weights_stay_one(n: int) -> None:
    for step in range(2 * n.bit_length()):
        receivers = sorted(sgp.out_peer(r, n, step) for r in range(n))
        assert receivers == list(range(n)), (n, step)
        # push-sum weights by hand: w_i <- w_i / 2 + sum of w_j / 2 over in-neighbours j; all start at 1
        weights = [1.0] * n
        incoming = [0.0] * n
        for r in range(n):
            incoming[sgp.out_peer(r, n, step)] += weights[r] / 2
        assert [w / 2 + i for w, i in zip(weights, incoming, strict=True)] == [1.0] * n


def test_node_level_plan_prices_the_intra_node_sync_from_the_layout() -> None:
    """Node-level SGP (the reference's default) plans the node's gradient all-reduce and parameter broadcast
    beside the leader's push; the ranks per node come from the run's layout (``PlanSetting.layout``)."""
    from distrepro.orchestration.plan import build_plan

    sets = ["method=sgp", "method_params={}", "optimizer=null", "schedule=null"]
    config = Path(__file__).resolve().parents[2] / "methods" / "decentdp" / "configs" / "allreduce.yaml"
    plan = build_plan(config, sets)  # a40-25gbe-16: 4 GPUs on each of 4 nodes
    groups = [(c["pattern"], c["participants"]) for c in plan["method_plan"]["transfers"]]
    assert groups == [("p2p", "pair"), ("all_reduce", "node"), ("broadcast", "node")]
    device = build_plan(config, [*sets[:1], "method_params={level: device}", *sets[2:]])
    assert [c["participants"] for c in device["method_plan"]["transfers"]] == ["pair"]
