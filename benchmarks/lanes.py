"""Cost of the flow scheduler per event: 64 ranks on 8 nodes, 8 flows in flight per rank.

Every event (a flow starting or ending) re-runs progressive filling over the flows that share a NIC with
the changed one. Here all 512 flows cross nodes, so one event touches every NIC and the whole set: the
worst case for the component-limited recompute. Steady state: each time a flow ends a new one starts, so
512 stay in flight. Prints microseconds per event (start + end counted as two events).

Why CPU time next to wall time: this runs on shared hosts whose load average swings from 0 to 10 while it
runs; wall time then measures the neighbours, CPU time (``time.process_time``, this process only) mostly
the code. The load average before and after is printed so a figure can be read against its conditions.
``--repeat`` runs the whole measurement again on a fresh network (same seed, same events) and reports the
best CPU figure, the usual way to strip the remaining interference. ``--profile`` prints the top of a
cProfile of one run instead. ``--alone`` measures the other end: one flow at a time between two nodes,
as every lockstep method issues them (each operation starts and ends alone on the network).

    python benchmarks/lanes.py [--ranks 64] [--per-rank 8] [--events 4000] [--repeat 3] [--alone] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import time

from distrepro.timing.network import Flow, FlowNetwork


def run(ranks: int, per_node: int, per_rank: int, events: int) -> tuple[float, float, int]:
    """(wall s, CPU s, events) of ``events`` flow events in steady state, setup excluded."""
    nodes = ranks // per_node
    cap = {(d, n): 1.25e9 for n in range(nodes) for d in ("tx", "rx")}
    net = FlowNetwork(cap)
    rng = random.Random(0)
    key = 0

    def new_flow(t: float) -> None:
        nonlocal key
        a = rng.randrange(ranks)
        b = (a + per_node * rng.randrange(1, nodes)) % ranks  # another node
        key += 1
        uses = ((("tx", a // per_node), 1), (("rx", b // per_node), 1))
        net.add(Flow(key, rng.uniform(1e6, 1e8), 1.25e9, uses, t), t)

    for _ in range(ranks * per_rank):
        new_flow(0.0)
    done = 0
    w0, c0 = time.perf_counter(), time.process_time()
    while done < events:
        t, flow = net.next_completion()  # type: ignore[misc]
        net.advance(t)
        net.remove(flow.key)
        new_flow(t)
        done += 2
    return time.perf_counter() - w0, time.process_time() - c0, done


def run_alone(events: int) -> tuple[float, float, int]:
    """(wall s, CPU s, events) of ``events`` flow events, each flow alone (the same pattern every time)."""
    net = FlowNetwork({("tx", 0): 1.25e9, ("rx", 1): 1.25e9})
    uses = ((("tx", 0), 1), (("rx", 1), 1))
    rng = random.Random(0)
    done = 0
    w0, c0 = time.perf_counter(), time.process_time()
    while done < events:
        t = net.now
        net.add(Flow(done, rng.uniform(1e6, 1e8), 1.25e9, uses, t), t)
        t, flow = net.next_completion()  # type: ignore[misc]
        net.advance(t)
        net.remove(flow.key)
        done += 2
    return time.perf_counter() - w0, time.process_time() - c0, done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--per-node", type=int, default=8)
    ap.add_argument("--per-rank", type=int, default=8)
    ap.add_argument("--events", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=1, help="runs; the best CPU time is reported")
    ap.add_argument("--alone", action="store_true", help="one flow at a time instead (the lockstep case)")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of one run (times inflated)")
    args = ap.parse_args()

    def once() -> tuple[float, float, int]:
        return run_alone(args.events) if args.alone else run(args.ranks, args.per_node, args.per_rank, args.events)

    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(once)
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
        return
    load0 = os.getloadavg()
    results = [once() for _ in range(max(1, args.repeat))]
    load1 = os.getloadavg()
    wall, cpu, events = min(results, key=lambda r: r[1])
    nodes = args.ranks // args.per_node
    shape = (
        "1 flow at a time, 2 nodes"
        if args.alone
        else f"{args.ranks} ranks, {nodes} nodes, {args.ranks * args.per_rank} flows in flight"
    )
    runs = ", ".join(f"{r[1] / events * 1e6:.1f}" for r in results)
    print(
        f"{shape}, {events} events, best of {len(results)}: {cpu / events * 1e6:.1f} us CPU per event, "
        f"{wall / events * 1e6:.1f} us wall (CPU per run: {runs} us)"
    )
    print(
        "load average (1, 5, 15 min): before "
        + " ".join(f"{x:.2f}" for x in load0)
        + ", after "
        + " ".join(f"{x:.2f}" for x in load1)
    )


if __name__ == "__main__":
    main()
