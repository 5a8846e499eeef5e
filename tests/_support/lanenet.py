"""A small in-process fabric for hand-computed network cases: one GPU per node, 1 GB/s NICs, no latency,
so every time is a division (``G`` bytes take 1 s on one NIC)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from distrepro.engine.clock import VirtualClock
from distrepro.engine.inprocess.comm import Fabric, InProcessComm
from distrepro.engine.inprocess.scheduler import Scheduler
from distrepro.hardware.profiles import load_profile
from distrepro.timing.timemodel import CommCostModel

G = 1e9

PROFILE = """\
schema_version: 2
name: lanes
description: one GPU per node, 1 GB/s NICs, no latency
collective_algorithm: {algorithm}
nodes:
{nodes}
network:
  intra_node: {{latency_us: 0, bandwidth_gbytes_per_s: 10, source: "[E] test"}}
  inter_node: {{latency_us: 0, bandwidth_gbytes_per_s: 1, source: "[E] test"}}
"""


class Net:
    def __init__(
        self, tmp_path: Path, nodes: int, bytes_scale: float = 1.0, per_node: int = 1, algorithm: str = "ring"
    ) -> None:
        """``per_node`` GPUs per node (joined by 10 GB/s intra-node links). ``algorithm``: the profile's
        ``collective_algorithm``; ``ring`` (the flat model) by default, which the hand computations assume."""
        text = "".join(
            f'  - name: n{i}\n    nic: {{latency_us: 0, bandwidth_gbytes_per_s: 1, source: "[E] test"}}\n'
            f"    devices:\n      - {{name: g, kind: gpu, count: {per_node}, memory_gib: 16, "
            f'effective_flops_per_s: 1.0e12, source: "[E] test"}}\n'
            for i in range(nodes)
        )
        path = tmp_path / "lanes.yaml"
        path.write_text(PROFILE.format(nodes=text, algorithm=algorithm), encoding="utf-8")
        profile = load_profile(path)
        self.clocks = [VirtualClock(r) for r in range(nodes * per_node)]
        self.sched = Scheduler(self.clocks)
        self.fabric = Fabric(self.sched, CommCostModel(profile), bytes_scale)
        self.out: dict[int, Any] = {}

    def run(self, body: Callable[[int, InProcessComm, VirtualClock], Any]) -> dict[int, Any]:
        def target(rank: int) -> Callable[[], None]:
            return lambda: self.out.__setitem__(rank, body(rank, self.fabric.comms[rank], self.clocks[rank]))

        self.sched.run([target(r) for r in range(len(self.clocks))])
        return self.out
