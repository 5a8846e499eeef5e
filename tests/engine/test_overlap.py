"""DDP-style overlap of the gradient all-reduce with backward (issue 11 item 5), on a hand-computed case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from lanenet import Net

from distrepro.api.method import Batch
from distrepro.api.overlap import all_reduce_overlapped, buckets
from distrepro.engine.harness_worker import HarnessWorker

pytestmark = pytest.mark.smoke

MiB = 1024 * 1024
SCALE = 25 * MiB / 256  # each 8x8 float32 weight (256 B) stands for 25 MiB of gradient


def _flat(rows: Any) -> list[float]:
    return [x for row in rows for x in row]


def _model() -> torch.nn.Sequential:
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
        out[rank] = [p.grad.clone() for p in model.parameters() if p.grad is not None]

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


def test_the_plan_has_every_emulated_bucket_each_charged_as_itself_whatever_the_proxy_holds() -> None:
    """tests/_support/bucket_case.py: a five-layer table gives DDP's buckets of 1.2 MB (the first, closed past 1 MiB),
    40 and 40 MB (closed past 25 MiB) at 0.4, 0.8 and 1.0 of backward; the proxy's two weights fall into the last two,
    the first holds none. Each bucket is charged its own bytes: a payload of its tensors counts as the bucket (half
    of them as half), and the empty bucket counts as itself whatever it sends."""
    import bucket_case as case

    from distrepro.api.overlap import bucket_plan, emulated_buckets

    flat = [x for b in emulated_buckets(case.TABLE) for x in (b.nbytes, b.ready)]
    assert flat == pytest.approx([x for pair in case.BUCKETS for x in pair], rel=1e-12)
    model = case.proxy()
    plan = bucket_plan(model, case.SCALE, case.TABLE)
    assert [len(b.params) for b in plan] == case.HELD
    assert plan[1].params[0] is model[1].weight and plan[2].params[0] is model[0].weight  # reverse order
    assert [b.ready for b in plan] == pytest.approx([r for _, r in case.BUCKETS], rel=1e-12)
    charges = [b.charge for b in plan]
    assert all(c is not None for c in charges)
    bucket_bytes = [n for n, _ in case.BUCKETS]
    assert [c.stands_for * case.SCALE for c in charges] == pytest.approx(bucket_bytes, rel=1e-12)  # type: ignore[union-attr]
    assert [c.count(c.proxy_bytes) * case.SCALE for c in charges] == pytest.approx(bucket_bytes, rel=1e-12)  # type: ignore[union-attr]
    assert charges[1].count(128) * case.SCALE == pytest.approx(20e6, rel=1e-12)  # type: ignore[union-attr]
    assert charges[0].count(4) == charges[0].count(0) == charges[0].stands_for  # type: ignore[union-attr]
    proxy_plan = bucket_plan(model, case.SCALE, None)  # no table: the proxy's buckets (each weight 40.6 MB)
    assert [b.ready for b in proxy_plan] == pytest.approx([0.5, 1.0]) and {b.charge for b in proxy_plan} == {None}


def test_in_process_every_emulated_bucket_is_launched_at_its_time_and_charged_its_bytes(tmp_path: Path) -> None:
    """The hand-computed times of tests/_support/bucket_case.py on the in-process engine (the distributed engine's
    run of the same case: tests/engine/test_dist_overlap.py)."""
    import bucket_case as case

    out = Net(tmp_path, 2, bytes_scale=case.SCALE).run(case.scenario)
    for rank in (0, 1):
        assert out[rank]["held"] == case.HELD
        assert _flat(out[rank]["works"]) == pytest.approx(_flat(case.WORKS), rel=1e-12)
        assert out[rank]["t"] == pytest.approx(case.STEP_END, rel=1e-12)
        assert out[rank]["bytes"] == pytest.approx(case.EMULATED_BYTES, abs=3)  # S per rank per 2-rank ring
    assert out[0]["grads"] == out[1]["grads"]  # the proxy's real gradients are averaged


def test_charged_as_counts_a_payload_as_the_bucket_and_restores_the_comm() -> None:
    from distrepro.api.overlap import BucketCharge, charged_as, counted

    class Comm:
        bucket_charge: BucketCharge | None = None

    comm, charge = Comm(), BucketCharge(proxy_bytes=256.0, stands_for=1024.0)
    with charged_as(comm, charge):
        assert comm.bucket_charge is charge and counted(256, comm.bucket_charge) == 1024.0
        with charged_as(comm, None):  # no table: nothing changes
            assert comm.bucket_charge is charge
    assert comm.bucket_charge is None and counted(256, comm.bucket_charge) == 256


def test_the_engine_charges_the_emulated_buckets_and_the_reducers_cost(tmp_path: Path) -> None:
    """The hand-computed case above (two ranks, 1 GB/s, compute 1 s, backward 0.5, 50 MiB of gradient), now with the
    VGG-like layer table (buckets of 40, 80 and 4 MB of its 124 MB, ready at 0.005, 0.01 and 1.0 of backward) and a
    reducer cost of 0.1 s (added to backward): backward runs 0.5 → 1.1 s. Each bucket is charged its share of the
    50 MiB: 40/124, 80/124 and 4/124 of 52,428,800 B. Bucket 0 is ready at 0.5 + 0.6 x 0.005 = 0.503 s, bucket 1 at
    0.506 s and queues behind it on the lane (both end long before backward does); bucket 2 is ready at 1.1 s and
    ends 52,428,800 x 4/124 / 1e9 s later. The clock's compute includes the reducer's 0.1 s."""
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
    assert [c.t for c in net.clocks] == pytest.approx([1.1 + 52_428_800 * 4 / 124 / 1e9] * 2, rel=1e-12)
    assert [c.compute_s for c in net.clocks] == pytest.approx([1.1, 1.1], rel=1e-12)
