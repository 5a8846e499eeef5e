"""Cost of the flow scheduler per event: 64 ranks on 8 nodes, 8 flows in flight per rank (issue 11 item 6).

Every event (a flow starting or ending) re-runs progressive filling over the flows that share a NIC with
the changed one. Here all 512 flows cross nodes, so one event touches every NIC and the whole set: the
worst case for the component-limited recompute. Steady state: each time a flow ends a new one starts, so
512 stay in flight. Prints microseconds per event (start + end counted as two events).

    python benchmarks/lanes.py [--ranks 64] [--per-rank 8] [--events 4000]
"""

from __future__ import annotations

import argparse
import random
import time

from suite.network import Flow, FlowNetwork


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--per-node", type=int, default=8)
    ap.add_argument("--per-rank", type=int, default=8)
    ap.add_argument("--events", type=int, default=4000)
    args = ap.parse_args()
    nodes = args.ranks // args.per_node
    cap = {(d, n): 1.25e9 for n in range(nodes) for d in ("tx", "rx")}
    net = FlowNetwork(cap)
    rng = random.Random(0)
    key = 0

    def new_flow(t: float) -> None:
        nonlocal key
        a = rng.randrange(args.ranks)
        b = (a + args.per_node * rng.randrange(1, nodes)) % args.ranks  # another node
        key += 1
        uses = ((("tx", a // args.per_node), 1), (("rx", b // args.per_node), 1))
        net.add(Flow(key, rng.uniform(1e6, 1e8), 1.25e9, uses, t), t)

    for _ in range(args.ranks * args.per_rank):
        new_flow(0.0)
    events = 0
    t0 = time.perf_counter()
    while events < args.events:
        t, flow = net.next_completion()  # type: ignore[misc]
        net.advance(t)
        net.remove(flow.key)
        new_flow(t)
        events += 2
    dt = time.perf_counter() - t0
    print(
        f"{args.ranks} ranks, {nodes} nodes, {len(net.flows)} flows in flight: "
        f"{dt / events * 1e6:.0f} us per event ({events} events, {dt:.2f} s)"
    )


if __name__ == "__main__":
    main()
