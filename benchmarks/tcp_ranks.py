"""What one all-reduce costs over 25 GbE as the ranks grow, across the latency range a TCP profile declares.

The A40 profile (``hardware_profiles/a40-25gbe-16.yaml``: 4 GPUs a node, one 25 GbE NIC, 2.8 GB/s, 30 µs a step over
TCP, plausible 15-60 µs) is copied to 2-32 nodes, each copy's NIC latency set to the range's ends and centre, and the
collective model prices one call alone (``CommCostModel.collective``: NCCL's algorithm and protocol, a ring's steps
in two slices). It shows how much of a large call's growth with ranks the model can give within the profile's own
latency range, which bounds what the latency term can explain of measurements that grow faster
(docs/emulator.md, "All-reduce over TCP at many ranks").

    python benchmarks/tcp_ranks.py [--sizes 4096,1048576,26214400] [--latencies 15,30,60]
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

from distrepro.hardware.profiles import HardwareProfile
from distrepro.safe_yaml import read_yaml_mapping
from distrepro.timing.timemodel import CommCostModel

PROFILE = Path(__file__).resolve().parents[1] / "hardware_profiles" / "a40-25gbe-16.yaml"
NODES = (2, 4, 8, 16, 32)


def profile_at(nodes: int, latency_us: float, base: dict[str, Any]) -> HardwareProfile:
    """The base profile with ``nodes`` copies of its first node and every inter-node latency set to ``latency_us``."""
    raw = copy.deepcopy(base)
    first = raw["nodes"][0]
    first["nic"]["latency_us"] = latency_us
    raw["nodes"] = [{**copy.deepcopy(first), "name": f"node{i}"} for i in range(nodes)]
    raw["network"]["inter_node"]["latency_us"] = latency_us
    raw["name"] = f"a40-25gbe-{4 * nodes}"
    return HardwareProfile.model_validate(raw)


def table(sizes: list[int], latencies: list[float]) -> str:
    base = read_yaml_mapping(PROFILE)
    head = "| bytes | latency | " + " | ".join(f"{4 * n} GPUs" for n in NODES) + " | 8 → 128 |"
    lines = [head, "|---|---:|" + "---:|" * len(NODES) + "---:|"]
    for size in sizes:
        for latency in latencies:
            costs = []
            for n in NODES:
                how = CommCostModel(profile_at(n, latency, base)).collective("all_reduce", range(4 * n), size)
                costs.append((how.seconds * 1e3, f"{how.algorithm}/{how.protocol}"))
            cells = [
                f"{ms:.2f} ({algo})" if i in (0, len(costs) - 1) else f"{ms:.2f}" for i, (ms, algo) in enumerate(costs)
            ]
            growth = costs[-1][0] / costs[0][0] - 1
            lines.append(f"| {size:,} | {latency:g} µs | " + " | ".join(cells) + f" | {growth:+.0%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4096,1048576,26214400", help="bytes per call, comma-separated")
    parser.add_argument("--latencies", default="15,30,60", help="NIC latencies in µs, comma-separated")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    latencies = [float(s) for s in args.latencies.split(",")]
    print(table(sizes, latencies))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
