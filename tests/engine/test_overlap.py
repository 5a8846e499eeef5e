"""DDP-style overlap of the gradient all-reduce with backward (issue 11 item 5), on a hand-computed case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from test_lanes import Net

from distrepro.api.method import Batch
from distrepro.api.overlap import all_reduce_overlapped, buckets
from distrepro.engine.harness_worker import HarnessWorker

pytestmark = pytest.mark.smoke

MiB = 1024 * 1024
SCALE = 25 * MiB / 256  # each 8x8 float32 weight (256 B) stands for 25 MiB of gradient


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8, bias=False), torch.nn.Linear(8, 8, bias=False))


def test_buckets_are_25mb_in_reverse_parameter_order() -> None:
    model = _model()
    groups = buckets(model, SCALE)
    assert [[id(p) for p in g] for g in groups] == [[id(model[1].weight)], [id(model[0].weight)]]
    assert len(buckets(model, SCALE / 4)) == 1  # 2 x 6.25 MiB: one bucket


@pytest.mark.parametrize("overlap", [True, False])
def test_step_costs_max_of_compute_and_last_bucket_not_the_sum(tmp_path: Path, overlap: bool) -> None:
    """Two ranks on two nodes (1 GB/s, no latency), compute 1 s per step, backward_fraction 0.5, two
    25 MiB buckets. A 2-rank ring all-reduce of S costs S/B = 26,214,400 / 1e9 = 26.2144 ms.

    Overlap: forward ends at 0.5 s; bucket 0 (the last layer) is ready after half of backward, at 0.75 s,
    and ends at 0.7762144 s; bucket 1 is ready at 1.0 s (end of backward) and ends at 1.0262144 s: the step
    costs max(compute, last bucket's end) = 1.0262144 s. Without overlap: 1 s then one 50 MiB all-reduce,
    1 + 0.0524288 = 1.0524288 s.
    """
    net = Net(tmp_path, 2, bytes_scale=SCALE)
    out: dict[int, Any] = {}

    def body(rank: int, comm: Any, clock: Any) -> None:
        model = _model()
        ctx = HarnessWorker(
            rank, 2, model, comm, clock, lambda r, n, s, t: 1.0, ("t",), bytes_scale=SCALE, backward_fraction=0.5
        )
        batch = Batch(torch.randn(4, 8), torch.randint(0, 8, (4,)))
        if overlap:
            all_reduce_overlapped(ctx, batch, "equal")
        else:
            ctx.forward_backward(batch)
            comm.all_reduce_coalesced([p.grad for p in model.parameters()], op="mean")
        out[rank] = [p.grad.clone() for p in model.parameters()]

    net.run(body)
    expected = 1.0 + 26_214_400 / 1e9 if overlap else 1.0 + 2 * 26_214_400 / 1e9
    assert [c.t for c in net.clocks] == pytest.approx([expected] * 2, rel=1e-12)
    assert [c.compute_s for c in net.clocks] == pytest.approx([1.0, 1.0], rel=1e-12)
    for a, b in zip(out[0], out[1], strict=True):
        assert torch.equal(a, b)  # both ranks hold the mean gradient


# ---------------------------------------------------------------------- the emulated model's layers (issue 33)


def _table(*layers: tuple[int, float]) -> Any:
    from distrepro.hardware.layer_tables import Layer, LayerTable

    return LayerTable(tuple(Layer(f"l{i}", "linear", p, f, 0.0) for i, (p, f) in enumerate(layers)))


def test_emulated_buckets_follow_the_layer_table_not_the_proxy() -> None:
    """A VGG-like table: a conv stack (1 M params, 99 % of FLOPs) then fully-connected layers (30 M params, 1 %).
    Backward reaches the FC layers first: 89 % of the bytes are ready after 1 % of backward; the first bucket is
    DDP's 1 MiB one."""
    from distrepro.api.overlap import DDP_FIRST_BUCKET_BYTES, emulated_buckets

    table = _table((1_000_000, 99e9), (20_000_000, 0.5e9), (10_000_000, 0.5e9))
    plan = emulated_buckets(table)
    assert plan[0].nbytes >= DDP_FIRST_BUCKET_BYTES and plan[0].ready == pytest.approx(0.005)
    assert plan[1].ready == pytest.approx(0.01) and plan[-1].ready == pytest.approx(1.0)
    assert sum(b.nbytes for b in plan) == 4 * 31_000_000


def test_bucket_plan_deals_the_proxys_parameters_by_bytes_with_the_emulated_ready_times() -> None:
    from distrepro.api.overlap import bucket_plan

    model = _model()
    table = _table((1_000_000, 99e9), (20_000_000, 0.5e9), (10_000_000, 0.5e9))
    groups, fractions = bucket_plan(model, SCALE, table)
    assert [[id(p) for p in g] for g in groups] == [[id(model[1].weight)], [id(model[0].weight)]]
    # the FC bytes ready after 0.5 % of backward; the conv stack's bytes ride with the last proxy tensor, at the end
    assert fractions == pytest.approx([0.005, 1.0])
    _proxy_groups, proxy_fractions = bucket_plan(model, SCALE, None)
    assert proxy_fractions == pytest.approx([0.5, 1.0])  # the proxy's counts: half and half


def test_the_engine_charges_the_emulated_buckets_and_the_reducers_cost(tmp_path: Path) -> None:
    """The hand-computed case above (two ranks, 1 GB/s, compute 1 s, backward 0.5, two 25 MiB buckets), now with a
    layer table whose first bucket is ready after 0.5 % of backward and a reducer cost of 0.1 s (added to backward):
    backward runs 0.5 → 1.1 s; bucket 0 is ready at 0.5 + 0.6 x 0.005 = 0.503 s and ends at 0.5292 s; bucket 1 is
    ready at 1.1 s and ends at 1.1262144 s. The clock's compute includes the reducer's 0.1 s."""
    net = Net(tmp_path, 2, bytes_scale=SCALE)
    table = _table((1_000_000, 99e9), (20_000_000, 0.5e9), (10_000_000, 0.5e9))

    def body(rank: int, comm: Any, clock: Any) -> None:
        model = _model()
        ctx = HarnessWorker(
            rank,
            2,
            model,
            comm,
            clock,
            lambda r, n, s, t: 1.0,
            ("t",),
            bytes_scale=SCALE,
            backward_fraction=0.5,
            layers=table,
            framework_s=0.1,
        )
        all_reduce_overlapped(ctx, Batch(torch.randn(4, 8), torch.randint(0, 8, (4,))), "equal")

    net.run(body)
    assert [c.t for c in net.clocks] == pytest.approx([1.1 + 26_214_400 / 1e9] * 2, rel=1e-12)
    assert [c.compute_s for c in net.clocks] == pytest.approx([1.1, 1.1], rel=1e-12)
