"""NCCL's own cost model, restated: the constants of ``ncclTopoTuneModel`` / ``ncclTopoGetAlgoTime`` and of its
topology search that :mod:`distrepro.timing.collective_algorithms` charges collectives with.

Why a module of its own: these are figures read from one file of one commit (NVIDIA/nccl ``src/graph/tuning.cc``
and ``src/graph/search.cc`` @ 5067397c), each with the line it restates; the algorithms that use them, and the
physics NCCL's tuner leaves out (a ring's pipelined slices), are the other module's. Every figure is [S]: from the
source, none chosen from a measurement.
"""

from __future__ import annotations

#: NCCL base latency per call, µs (``tuning.cc`` baseLat, Ring and Tree rows)
BASE_LATENCY_US = {"simple": 8.4, "ll": 6.6}
#: LL's step latency relative to Simple's (``tuning.cc`` hwLat: 0.6/3.4, 1.0/5.7, 2.7/14)
LL_LATENCY_RATIO = 0.18
#: what LL saves per network step: the Simple protocol's own overhead (its flush and flag handshake), ``tuning.cc``
#: hwLat NET Ring Simple 14 - LL 2.7 µs. LL cannot make the wire faster: a network step takes at least the link's
#: latency less this, so over a link whose latency is the wire's (TCP sockets, 15-60 µs) LL's step is that latency
#: less 11.3 µs, not 0.18 of it (on InfiniBand's 14 µs both rules give NCCL's 2.7)
LL_NET_SAVING_US = 14.0 - 2.7
#: NCCL's network post overhead, µs (``tuning.cc`` ``getNetOverhead``: 1 on Intel and other CPUs, 2 on AMD): a ring
#: that crosses nodes "still has to launch nsteps * net overhead", so each of its intra-node steps takes at least
#: this (Simple: 3 times it) [S]; the CPU vendor is not in a profile, NCCL's default is taken
NET_OVERHEAD_US = 1.0
#: LL's bandwidth relative to Simple's (``tuning.cc``: ring LL ``busBw * .5``)
LL_BANDWIDTH_RATIO = 0.5
#: NCCL's tree all-reduce: bus bandwidth × 0.92, algorithm bandwidth = bus bandwidth × 0.5 (``tuning.cc``)
TREE_ALGBW_RATIO = 0.92 * 0.5
#: a tree between exactly two nodes: its bus bandwidth is the intra-node chain's, up to this many times the
#: network's [S]. Each of the double tree's two trees has one inter-node edge, carrying that tree's half of the data
#: up and back down, so each byte crosses the network once each way where the intra-node chain carries it twice.
#: NCCL's topology search raises a tree's intra-node speed while it is below twice the inter-node one ("increase
#: bwIntra for trees (2 nodes or collnet)", ``src/graph/search.cc`` @ 5067397c and v2.21.5-1, the version the
#: Decent-DP authors pin), and ``ncclTopoTuneModel`` rates every algorithm at ``bwIntra`` when ``nNodes <= 2``
#: (``tuning.cc``): NCCL's maintainers, NVIDIA/nccl#946 "the Tree performance can go up to ~2x the network speed
#: ... NCCL should use Tree on 2 nodes for large sizes", NVIDIA/nccl-tests#196 (two nodes of 8 PCIe GPUs, one
#: 100 Gb/s NIC each: bus bandwidth above the NIC's)
TWO_NODE_TREE_NET_FACTOR = 2.0

#: the per-channel speeds in GB/s NCCL's topology search tries for an inter-node channel of a Volta or Ampere GPU,
#: fastest first (``src/graph/search.cc`` ``speedArrayInter`` @ 5067397c; Hopper and Blackwell have tables of their
#: own)
NCCL_INTER_SPEEDS: tuple[float, ...] = (48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12)


def nccl_net_gbytes_per_s(nic_gbytes_per_s: float) -> float:
    """What NCCL's own model gives a channel through a NIC of ``nic_gbytes_per_s`` line rate (``topo.cc``: a NIC's
    bandwidth is its speed in Mb/s / 8000): the largest speed of :data:`NCCL_INTER_SPEEDS` at or below it.
    A 200 Gb/s HDR HCA (25 GB/s) runs at 24 GB/s, a 100 Gb/s EDR one (12.5) at 12: 0.96 of the line rate."""
    fitting = [s for s in NCCL_INTER_SPEEDS if s <= nic_gbytes_per_s]
    if not fitting:
        raise ValueError(f"a NIC of {nic_gbytes_per_s} GB/s is below NCCL's slowest channel speed")
    return float(fitting[0])


#: ``ncclTopoGetAlgoTime``'s "plateau effect of ring": a ring/Simple all-reduce across nodes has its latency multiplied
#: by this, below compute capability 8.0 and from it on (``tuning.cc`` @ 5067397c) [S]
RING_PLATEAU = {"below_sm80": 1.9, "sm80_and_above": 1.4}
#: ... only when the call moves at least this many bytes per channel and rank (``nBytes / (nChannels * nRanks)``)
PLATEAU_MIN_BYTES = 64
#: the emulator does not model NCCL's channels: the factor is applied where NCCL applies it whatever its channel
#: count, up to its ``MAXCHANNELS`` (``src/include/device.h``: 64)
PLATEAU_CHANNELS = 64
#: compute capability x 10 by GPU name (NVIDIA's CUDA GPUs table: T4 7.5, V100 7.0, A100 8.0, A40 and RTX 3090 8.6,
#: H100 9.0), matched against a device's name, longest key first; a GPU not named here is taken as 8.0 or above
COMPUTE_CAPABILITY = {"t4": 75, "v100": 70, "a100": 80, "a40": 86, "rtx3090": 86, "h100": 90, "h200": 90}
#: ``tuning.cc`` ``treeCorrectionFactor``: a tree all-reduce's bandwidth is multiplied by the entry of
#: ``log2(nBytes / 64)`` (0-22, i.e. 64 B to 256 MiB) of its protocol (in tenths); larger calls keep the model's
#: bandwidth
TREE_CORRECTION = {
    "ll": tuple(t / 10 for t in (10, 10, 10, 10, 9, 8, 7, 7, 7, 7, 6, 5, 4, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10)),
    "simple": tuple(t / 10 for t in (9, 9, 9, 9, 9, 9, 9, 8, 7, 6, 6, 5, 5, 5, 5, 6, 7, 8, 7, 7, 8, 9, 9)),
}


def compute_capability(device_name: str) -> int | None:
    """Compute capability x 10 of the GPU named ``device_name`` (``a100``, ``t4-node3``), None if not tabled."""
    name = device_name.lower()
    for key in sorted(COMPUTE_CAPABILITY, key=len, reverse=True):
        if name.startswith(key):
            return COMPUTE_CAPABILITY[key]
    return None


def ring_plateau(min_compute_capability: int | None) -> float:
    """The plateau factor for a group whose oldest GPU has ``min_compute_capability`` (None: not tabled, 8.0+)."""
    old = min_compute_capability is not None and min_compute_capability < 80
    return RING_PLATEAU["below_sm80" if old else "sm80_and_above"]


def tree_correction(protocol: str, nbytes: float) -> float:
    """``treeCorrectionFactor`` of a tree all-reduce of ``nbytes`` under ``protocol`` (1 outside 64 B-256 MiB)."""
    units = int(nbytes) >> 6
    if units < 1:
        return 1.0
    log_size = units.bit_length() - 1
    table = TREE_CORRECTION[protocol]
    return table[log_size] if log_size < len(table) else 1.0
