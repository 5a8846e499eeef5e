"""The flow scheduler's results are pinned bit for bit (``distrepro/timing/network.py``).

Why: the in-process engine feeds every communication through :class:`distrepro.timing.network.FlowNetwork`, and its
virtual times must be the same on every machine and across refactors, so the scheduler may be made faster
but never different. These tests replay seeded random scenarios (flows with different caps, one class of
many equal flows, intra-node links and NICs, a ring crossing a NIC twice, an unlimited resource, zero
volumes, flows with no resources, cancellations) and hash every observable after every event: the event
time, the flow that ended, and each flow's rate, remaining volume and ``contended`` flag, as ``float.hex``.
The hashes were produced by the scheduler before its speed-up (commit 0edce76, the plain progressive
filling over classes rebuilt on every event); a change of any bit anywhere fails them.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Hashable

import pytest

from distrepro.timing import network
from distrepro.timing.network import Flow, FlowNetwork, max_min_rates, simulate

pytestmark = pytest.mark.smoke

NODES, PER_NODE = 4, 3
RANKS = NODES * PER_NODE
#: NIC and intra-node capacities (bytes/s); ("sw",) is used by some flows and is unlimited
CAPACITY: dict[Hashable, float] = {
    **{("tx", n): (1e9, 2.1e9, 0.55e9, 1.3e9)[n] for n in range(NODES)},
    **{("rx", n): (0.9e9, 1.7e9, 0.6e9, 3.3e9)[n] for n in range(NODES)},
    **{("link", a, b): 4e9 + 1.37e8 * a for a in range(RANKS) for b in range(RANKS) if a // PER_NODE == b // PER_NODE},
}
CAPS = (0.25e9, 0.5e9, 1e9, 2e9, 5e9)


def _uses(hops: list[tuple[int, int]], unlimited: bool) -> tuple[tuple[Hashable, int], ...]:
    """Resources of ``hops`` with weights, as :class:`distrepro.timing.network.Paths` builds them."""
    uses: dict[Hashable, int] = {}
    for a, b in hops:
        na, nb = a // PER_NODE, b // PER_NODE
        for key in [("tx", na), ("rx", nb)] if na != nb else [("link", a, b)]:
            uses[key] = uses.get(key, 0) + 1
    if unlimited:
        uses[("sw",)] = 1
    return tuple(uses.items())


def _random_flow(rng: random.Random, key: int, t: float, sparse: bool = False) -> Flow:
    """A random flow. ``sparse``: point to point only, with a cap of its own, so a removal now and then
    splits a component (see also :func:`test_removing_a_bridge_refills_both_parts_together`)."""
    if sparse:
        a = rng.randrange(RANKS)
        hops = [(a, rng.choice([b for b in range(RANKS) if b != a]))]
        return Flow(key, rng.uniform(1e6, 2e9), rng.uniform(1e8, 3e9), _uses(hops, unlimited=False), t)
    kind = rng.random()
    if kind < 0.45:  # point to point, inter- or intra-node
        a = rng.randrange(RANKS)
        hops = [(a, rng.choice([b for b in range(RANKS) if b != a]))]
    elif kind < 0.75:  # a ring: crosses some NICs twice (weight 2)
        ring = rng.sample(range(RANKS), rng.randrange(2, 6))
        hops = [(ring[i], ring[(i + 1) % len(ring)]) for i in range(len(ring))]
    elif kind < 0.93:  # the same class again and again: node 0 to node 1
        hops = [(0, 3)]
    elif kind < 0.97:  # rides on nothing limited
        hops = []
    else:  # within one node only
        n = rng.randrange(NODES) * PER_NODE
        hops = [(n, n + 1), (n + 1, n + 2)]
    cap = rng.choice(CAPS) if rng.random() < 0.8 else rng.uniform(1e8, 3e9)
    if 0.75 <= kind < 0.93:
        cap = 1e9
    volume = 0.0 if rng.random() < 0.03 else rng.uniform(1e6, 2e9)
    return Flow(key, volume, cap, _uses(hops, unlimited=rng.random() < 0.1), t)


def _state(net: FlowNetwork) -> str:
    return ";".join(f"{k}:{f.rate.hex()}:{f.remaining.hex()}:{int(f.contended)}" for k, f in net.flows.items())


def _replay(seed: int, events: int, sparse: bool = False) -> tuple[str, int, float]:
    """(sha256 of the event log, flows completed, last event time) of a random scenario (``sparse``: see
    :func:`_random_flow`, at most 12 flows in flight)."""
    rng = random.Random(seed)
    net = FlowNetwork(CAPACITY)
    log = hashlib.sha256()
    key, done, t = 0, 0, 0.0
    for _ in range(events):
        nxt = net.next_completion()
        arrival = t + rng.expovariate(8.0) if len(net.flows) < (12 if sparse else 40) else float("inf")
        if nxt is not None and nxt[0] <= arrival:
            t, flow = nxt
            net.advance(t)
            net.remove(flow.key)
            done += 1
            log.update(f"end {t.hex()} {flow.key} {int(flow.contended)}|".encode())
        elif net.flows and rng.random() < 0.04:  # a cancellation, mid-flight
            t = arrival
            net.advance(t)
            victim = rng.choice(list(net.flows))
            net.remove(victim)
            log.update(f"cancel {t.hex()} {victim}|".encode())
        else:
            t = arrival
            key += 1
            net.add(_random_flow(rng, key, t, sparse), t)
            log.update(f"add {t.hex()} {key}|".encode())
        log.update(_state(net).encode())
        nxt = net.next_completion()
        log.update(f"next {nxt[0].hex()} {nxt[1].key}|".encode() if nxt else b"next none|")
    return log.hexdigest(), done, t


@pytest.mark.parametrize(
    ("seed", "sparse", "digest", "done", "last"),
    [
        (1, False, "216b987f8f0a04e250af521e4ad1da9f76492fcf2d459a977f27cf0cb44a44e3", 264, 123.97480585047917),
        (2, False, "3f64c55db2c4971807adaeea6e0f15d67fd52d16aa9d48b3c7472c838d585f84", 266, 137.777271645457),
        (3, False, "a79f49da880f0c0d7f5046ac68a308d6ac656ef5982d9120e627038e3ba9c463", 268, 143.8508199546289),
        (4, True, "2b0d832ca8b084130516d27376d28eef7a8e7578c9a2846819d8ddc3ffba3082", 286, 115.13652380086276),
    ],
)
def test_event_sequence_and_rates_are_bitwise_those_of_the_reference(
    seed: int, sparse: bool, digest: str, done: int, last: float
) -> None:
    """600 events per seed: every completion time, flow order, rate and remaining volume as recorded."""
    got = _replay(seed, 600, sparse)
    assert got == (digest, done, last)


def test_max_min_rates_and_simulate_are_bitwise_those_of_the_reference() -> None:
    """The pure functions on 40 random flow sets (up to 60 flows each, several components)."""
    rng = random.Random(7)
    log = hashlib.sha256()
    for i in range(40):
        flows = [_random_flow(rng, k, 0.0) for k in range(rng.randrange(1, 60))]
        rates = max_min_rates(flows, CAPACITY)
        log.update(" ".join(f"{k}:{r.hex()}" for k, r in rates.items()).encode())
        if i % 4 == 0:
            starts = [(rng.uniform(0.0, 1.0), f.volume, f.cap, f.uses) for f in flows]
            log.update(" ".join(e.hex() for e in simulate(starts, CAPACITY)).encode())
    assert log.hexdigest() == "0a053de871b205fea837b1176b35d9bb750001db2100e3b12a25f1da565c2851"


def test_the_scenarios_exercise_what_they_claim() -> None:
    """The flows replayed meet contention, classes of many equal flows, weight-2 uses, unlimited resources
    and zero volumes, so the hashes above pin those paths and not only the trivial ones (component splits:
    the bridge test below)."""
    rng = random.Random(1)
    flows = [_random_flow(rng, k, 0.0) for k in range(300)]
    assert any(w > 1 for f in flows for _, w in f.uses)
    assert any(("sw",) in dict(f.uses) for f in flows) and any(not f.uses for f in flows)
    assert any(f.volume == 0.0 for f in flows)
    sigs = [(f.cap, f.uses) for f in flows]
    assert max(sigs.count(s) for s in set(sigs)) >= 20
    rates = max_min_rates(flows, CAPACITY)
    assert sum(rates[f.key] < f.cap * (1 - 1e-12) for f in flows) > 100


def test_removing_a_bridge_refills_both_parts_together() -> None:
    """A flow bridging two groups of flows ends; the reference re-rates both groups in one filling (their
    levels rise together), which differs in the last bits from filling each apart in about a fifth of
    random cases. 300 such cases, hashed; and the check that the hash can see the difference."""
    rng = random.Random(11)
    log = hashlib.sha256()
    differs = 0
    for _ in range(300):
        cap = {(side, r): rng.uniform(1e8, 3e9) for side in range(2) for r in range(2)}
        net = FlowNetwork(cap)
        key = 0
        for side in range(2):
            for _ in range(rng.randrange(1, 5)):
                uses = tuple(((side, r), rng.randrange(1, 3)) for r in range(2) if rng.random() < 0.7)
                key += 1
                net.add(Flow(key, 1e9, rng.uniform(1e8, 3e9), uses or (((side, 0), 1),), 0.0), 0.0)
        net.add(Flow("bridge", 1e9, 3e9, (((0, 0), 1), ((1, 0), 1)), 0.0), 0.0)
        net.remove("bridge")
        log.update(_state(net).encode())
        apart = {
            **max_min_rates([f for f in net.flows.values() if f.uses[0][0][0] == 0], cap),
            **max_min_rates([f for f in net.flows.values() if f.uses[0][0][0] == 1], cap),
        }
        differs += apart != {k: f.rate for k, f in net.flows.items()}
    assert differs > 10
    assert log.hexdigest() == "e0407ad5a616003e121ea1128235e1feba602779a6c360bd05600010a27e853e"


def test_a_flow_alone_gets_the_filling_of_it_alone_also_in_a_reused_class() -> None:
    """A lockstep run starts and ends one pattern alone over and over: the network keeps the ended class
    (up to a bound) and its rate alone, and must still give what a filling of that flow alone gives,
    through more distinct patterns than it keeps and back to the first ones."""
    rng = random.Random(5)
    hops = [[(0, 3)], [(0, 3), (3, 6), (6, 0)], [(0, 3), (3, 1), (1, 4), (4, 0)], [(0, 1)]]  # the third: weight 2
    patterns = [(rng.choice(CAPS), _uses(rng.choice(hops), False)) for _ in range(8)]
    patterns += [(rng.uniform(1e8, 3e9), patterns[0][1]) for _ in range(network._IDLE_CLASSES + 10)]
    net = FlowNetwork(CAPACITY)
    for key, (cap, uses) in enumerate(patterns + patterns[:20] + patterns[-20:]):
        flow = Flow(key, 1e9, cap, uses, net.now)
        net.add(flow, net.now)
        assert flow.rate.hex() == max_min_rates([flow], CAPACITY)[key].hex()
        assert flow.contended == (flow.rate < cap * (1 - 1e-12))
        end = net.next_completion()
        assert end is not None and end[1] is flow
        net.advance(end[0])
        net.remove(key)
    assert len(net._idle) == network._IDLE_CLASSES


def test_a_key_already_in_progress_is_refused() -> None:
    net = FlowNetwork({"a": 1.0})
    net.add(Flow(1, 1.0, 1.0, (("a", 1),), 0.0), 0.0)
    with pytest.raises(ValueError, match="already in progress"):
        net.add(Flow(1, 1.0, 1.0, (("a", 1),), 0.0), 0.0)
