"""The ``decentdp`` plugin against the real library (PyPI ``decent-dp``, a test dependency).

Three levels: the per-iteration groups of every topology equal the library's ``_get_topo_edges`` (n = 4, 8,
16 with 1, 2 and 4 ranks per node); the AccumAdam(W) step equals ``decent_dp.optim.AccumAdam(W)``; and end
to end, 4 gloo processes running ``DecentralizedDataParallel`` reach the same parameters as the plugin on the
in-process engine, on the same tiny model, data and seed, for every topology and for Adam and AccumAdam.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
import zygote_ranks
from decentdp_library import OPTIMIZERS, STEPS, TOPOLOGIES, WORLD, batch, library_rank, tiny_model

from distrepro.api.method import ClusterLayout
from distrepro.api.optimizer_config import OptimizerConfig
from distrepro.engine.clock import VirtualClock
from distrepro.engine.inprocess.comm import Fabric
from distrepro.engine.inprocess.scheduler import Scheduler
from distrepro.hardware.profiles import load_profile
from distrepro.plugins.registry import get_method, plugin_module
from distrepro.timing.timemodel import CommCostModel
from distrepro.training.optimizers import build_optimizer

decent_topo = pytest.importorskip("decent_dp.topo")
decent_optim = pytest.importorskip("decent_dp.optim")

topo = plugin_module("decentdp", "topology")


def library_rounds(name: str, n: int, local: int) -> list[Any]:
    """The library's rounds without a process group: ``_get_topo_edges`` is a pure function of the sizes."""
    cls = decent_topo.TopologyReg.registry[name]
    obj = cls.__new__(cls)
    obj._world_size, obj._local_world_size, obj._n_nodes = n, local, n // local
    return [tuple(tuple(sorted(e.ranks)) for e in rnd) for rnd in obj._get_topo_edges()]


@pytest.mark.smoke
@pytest.mark.parametrize("n", [4, 8, 16])
@pytest.mark.parametrize("local", [1, 2, 4])
@pytest.mark.parametrize("name", TOPOLOGIES)
def test_rounds_equal_the_library(name: str, n: int, local: int) -> None:
    if name == "alternating-exp-ring" and n // local < 2:
        with pytest.raises(ValueError, match="number of nodes"):
            topo.rounds(name, n, local)
        return
    ours = topo.rounds(name, n, local)
    assert ours == library_rounds(name, n, local)
    assert all(topo.is_partition(r, n) for r in ours)


def test_aer_alternates_inter_and_intra_node_rounds() -> None:
    rounds = topo.rounds("alternating-exp-ring", 16, 4)  # 4 nodes of 4
    assert len(rounds) == 4  # 2 per exponent, log2(4) exponents
    sizes = [sorted(len(g) for g in r) for r in rounds]
    assert sizes[0] == [4, 4, 8]  # node pair (0,1) starts intra, pair (2,3) starts inter
    assert sizes[1] == [4, 4, 8]


def test_comm_round_skips_index_two() -> None:
    assert [topo.comm_round(k) for k in range(1, 6)] == [1, 3, 4, 5, 6]
    with pytest.raises(ValueError):
        topo.comm_round(0)


@pytest.mark.smoke
@pytest.mark.parametrize("decoupled", [False, True])
def test_accum_adam_step_equals_the_library(decoupled: bool) -> None:
    torch.manual_seed(0)
    p_lib = torch.nn.Parameter(torch.randn(5, 3))
    p_ours = torch.nn.Parameter(p_lib.detach().clone())
    kw = {"lr": 1e-2, "betas": (0.9, 0.98), "eps": 1e-8, "weight_decay": 0.05, "accum_iter": 3}
    lib_cls = decent_optim.AccumAdamW if decoupled else decent_optim.AccumAdam
    lib = lib_cls([p_lib], **kw)
    name = "accum_adamw" if decoupled else "accum_adam"
    ours = build_optimizer([p_ours], OptimizerConfig(name=name, **kw))  # type: ignore[arg-type]
    for step in range(10):
        g = torch.randn(5, 3, generator=torch.Generator().manual_seed(step))
        p_lib.grad, p_ours.grad = g.clone(), g.clone()
        lib.step()
        ours.step()
    torch.testing.assert_close(p_ours, p_lib, rtol=1e-6, atol=1e-7)
    assert not torch.allclose(p_ours, torch.randn(5, 3, generator=torch.Generator().manual_seed(0)))


# ------------------------------------------------------------------------------ end to end


class _Ctx:
    """The parts of a WorkerContext the plugin uses, over the in-process fabric, with a fixed tiny model."""

    def __init__(self, rank: int, comm: Any, clock: VirtualClock) -> None:
        self.rank, self.world_size, self.comm, self.clock = rank, WORLD, comm, clock
        self.model = tiny_model()
        self.cluster = ClusterLayout(WORLD, (0, 0, 1, 1), ("n0", "n1"))
        self.lr = None
        self.step = 0

    def build_optimizer(self, params: Any, default: OptimizerConfig) -> torch.optim.Optimizer:
        return build_optimizer(params, default)

    def record(self, name: str, value: float) -> None:
        """The plugin records what the regime checks read (e.g. ``moment_refreshes``); nothing reads it here."""

    def forward_backward(self, _batch: Any, on_bucket: Any = None) -> float:
        self.step += 1
        self.model.zero_grad(set_to_none=True)
        x, y = batch(self.rank, self.step)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.clock.compute(1e-3)
        if on_bucket is not None:
            on_bucket(0, list(reversed(list(self.model.parameters()))))
        return float(loss.detach())


def plugin_params(tmp_path: Path, opt_name: str, name: str) -> list[torch.Tensor]:
    profile_file = tmp_path / "two-by-two.yaml"
    device = '{name: g, kind: gpu, count: 2, memory_gib: 16, effective_flops_per_s: 1.0e12, source: "[E] test"}'
    nodes = "".join(f"  - name: n{i}\n    devices:\n      - {device}\n" for i in range(2))
    link = '{latency_us: 10, bandwidth_gbytes_per_s: 1, source: "[E] test"}'
    profile_file.write_text(
        f"schema_version: 1\nname: two-by-two\ndescription: test\nnodes:\n{nodes}"
        f"network:\n  intra_node: {link}\n  inter_node: {link}\n",
        encoding="utf-8",
    )
    profile = load_profile(profile_file)
    clocks = [VirtualClock(r) for r in range(WORLD)]
    sched = Scheduler(clocks)
    fabric = Fabric(sched, CommCostModel(profile))
    plugin: Any = get_method("decentdp")  # its own Params, not the base class the registry declares
    cfg = OptimizerConfig(name=opt_name, **OPTIMIZERS[opt_name])  # type: ignore[arg-type]
    out: dict[int, list[torch.Tensor]] = {}

    def target(rank: int) -> Any:
        def go() -> None:
            method = plugin.cls(plugin.cls.Params(topology=name, optimizer=cfg))
            ctx = _Ctx(rank, fabric.comms[rank], clocks[rank])
            method.setup(ctx)
            for _ in range(STEPS):
                method.train_step(ctx, None)
            out[rank] = [p.detach().clone() for p in ctx.model.parameters()]

        return go

    sched.run([target(r) for r in range(WORLD)])
    return [t for r in range(WORLD) for t in out[r]]


@pytest.mark.distributed
def test_plugin_matches_decentralized_data_parallel(tmp_path: Path) -> None:
    rendezvous = f"file://{tmp_path / 'rendezvous'}"
    out = str(tmp_path / "lib-{rank}.pt")
    # the library's four gloo ranks, forked from the zygote (decentdp_library says why); raises unless all end with 0
    zygote_ranks.spawn(library_rank, (rendezvous, out), WORLD)
    lib = [torch.load(out.format(rank=r)) for r in range(WORLD)]
    for opt_name in OPTIMIZERS:
        for name in TOPOLOGIES:
            ours = plugin_params(tmp_path, opt_name, name)
            theirs = [t for r in range(WORLD) for t in lib[r][f"{opt_name}/{name}"]]
            for a, b in zip(ours, theirs, strict=True):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=f"{opt_name}/{name}")
            if name != "complete":  # replicas really differ: the test could fail
                assert not torch.allclose(theirs[0], theirs[len(theirs) // WORLD])


def test_wrong_round_order_would_be_detected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-peer exponential graph on 4 ranks depends on the library's 1, 3, 4, ... round order."""
    right = plugin_params(tmp_path, "adam", "one-peer-exp")
    monkeypatch.setattr(topo, "comm_round", lambda step: step)
    wrong = plugin_params(tmp_path, "adam", "one-peer-exp")
    assert any(not torch.allclose(a, b) for a, b in zip(right, wrong, strict=True))
