"""A hand-computed case of the emulated model's gradient buckets (issue 44), run the same on both engines.

The emulated model (a constructed layer table, every layer the same forward FLOPs) has five layers; in backward
order 0.4 and 0.8 MB (the first bucket closes at DDP's 1 MiB once both are in: 1.2 MB, ready after 2 of 5 layers,
0.4 of backward), then 20 and 20 MB (the 25 MiB cap is passed with the second: 40 MB at 0.8), then 40 MB (at
1.0). The proxy (two 8x8 weights, 256 B each) has fewer tensors than the emulated model has buckets: its last
weight falls into the 40 MB bucket at 0.8, its first into the one at 1.0, and the 1.2 MB bucket holds none of them.
Each is launched at its own ready time and charged its own bytes all the same.

Two ranks on two nodes, 1 GB/s, no latency (a 2-rank ring all-reduce of S costs S / 1e9 s and puts S on the wire
per rank); compute 1 s per step, backward half of it: forward ends at 0.5 s, so bucket i is ready at
0.5 + 0.5 x ready_i. Expected (issue, start, end) of the three all-reduces: (0.7, 0.7, 0.7012),
(0.9, 0.9, 0.94), (1.0, 1.0, 1.04). Before, the empty bucket rode with the next one: two all-reduces of
40.6 MB at 0.9 and 1.0 s, the step ending at 1.0406 s.
"""

from __future__ import annotations

from typing import Any

import torch

from distrepro.hardware.layer_tables import Layer, LayerTable

MB = 1e6
#: forward order: (parameters, forward FLOPs per sample)
LAYERS = ((10_000_000, 1e9), (5_000_000, 1e9), (5_000_000, 1e9), (200_000, 1e9), (100_000, 1e9))
TABLE = LayerTable(tuple(Layer(f"l{i}", "linear", p, f, 0.0) for i, (p, f) in enumerate(LAYERS)))
EMULATED_BYTES = 4.0 * sum(p for p, _ in LAYERS)  # 81.2 MB
SCALE = EMULATED_BYTES / 512  # the proxy's 512 bytes stand for the emulated model's
#: (bytes, ready fraction of backward) of the emulated buckets; proxy tensors each holds (last weight first)
BUCKETS = [(1.2 * MB, 0.4), (40 * MB, 0.8), (40 * MB, 1.0)]
HELD = [0, 1, 1]
#: (issue, start, end) of each bucket's all-reduce, and the step's end
WORKS = [(0.7, 0.7, 0.7012), (0.9, 0.9, 0.94), (1.0, 1.0, 1.04)]
STEP_END = 1.04

PROFILE = """\
schema_version: 2
name: buckets
description: one GPU per node, 1 GB/s NICs, no latency
collective_algorithm: ring
nodes:
  - {name: n0, nic: {latency_us: 0, bandwidth_gbytes_per_s: 1, source: "[E] test"},
     devices: [{name: g, kind: gpu, count: 1, memory_gib: 16, effective_flops_per_s: 1.0e12, source: "[E] test"}]}
  - {name: n1, nic: {latency_us: 0, bandwidth_gbytes_per_s: 1, source: "[E] test"},
     devices: [{name: g, kind: gpu, count: 1, memory_gib: 16, effective_flops_per_s: 1.0e12, source: "[E] test"}]}
network:
  intra_node: {latency_us: 0, bandwidth_gbytes_per_s: 10, source: "[E] test"}
  inter_node: {latency_us: 0, bandwidth_gbytes_per_s: 1, source: "[E] test"}
"""


def proxy() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8, bias=False), torch.nn.Linear(8, 8, bias=False))


def scenario(rank: int, comm: Any, clock: Any) -> dict[str, Any]:
    """One bucketed forward/backward whose callbacks all-reduce each bucket's gradients (non-blocking, then waited):
    the proxy tensors each bucket held, each all-reduce's times, the clock and the bytes sent."""
    from distrepro.api.method import Batch
    from distrepro.engine.harness_worker import HarnessWorker

    model = proxy()
    ctx = HarnessWorker(
        rank, 2, model, comm, clock, lambda r, n, s, t: 1.0, ("t",), bytes_scale=SCALE, backward_fraction=0.5,
        layers=TABLE,
    )  # fmt: skip
    held: list[int] = []
    works: list[Any] = []

    def launch(_i: int, params: list[torch.nn.Parameter]) -> None:
        held.append(len(params))
        works.append(comm.all_reduce_coalesced([p.grad for p in params], op="mean", async_op=True))

    torch.manual_seed(rank)
    ctx.forward_backward(Batch(torch.randn(4, 8), torch.randint(0, 8, (4,))), on_bucket=launch)
    for w in works:
        w.wait()
    return {
        "held": held,
        "works": [[w.issue_s, w.start_s, w.end_s] for w in works],
        "t": clock.t,
        "bytes": comm.bytes_sent,
        "grads": [p.grad.reshape(-1).tolist() for p in model.parameters() if p.grad is not None],
    }
