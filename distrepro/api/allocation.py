"""What a method decides and sees about the data split: devices, the cluster, an allocation, the layout.

Part of the method API (:mod:`distrepro.api.method` re-exports every name here; plugins import them from there).
A method's :meth:`~distrepro.api.method.Method.allocate` reads a :class:`ClusterView` of :class:`DeviceView` s and
returns an :class:`Allocation`; :class:`ClusterLayout` is ``ctx.cluster``, the node of each rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

PartitionKind = Literal["iid_shards", "full_shuffle"]


@dataclass(frozen=True)
class DeviceView:
    """What a method may know about one worker's device when it allocates data."""

    rank: int
    name: str
    kind: str  # "gpu" | "cpu"
    declared_samples_per_s: float  # from the hardware profile, for the charged workload
    memory_gib: float | None = None


@dataclass(frozen=True)
class ClusterView:
    """Input to :meth:`Method.allocate`: the cluster as declared, plus what was measured.

    ``measured_samples_per_s`` holds each worker's compute throughput over the previous epoch
    (samples / compute seconds, waiting excluded); it is ``None`` before the first epoch.
    ``current`` is the allocation in force during that epoch (``None`` before training), so a
    method can damp its re-split (Chao et al.) while ``allocate`` stays a pure function.
    ``profiled_samples_per_s`` holds each worker's speed from the timed warm-up the harness runs
    before training when the method asks for one (:meth:`Method.warmup_steps`); ``None`` otherwise.
    """

    world_size: int
    devices: tuple[DeviceView, ...]
    dataset_size: int
    batch_sizes: tuple[int, ...]  # per-rank batch sizes from the run config / profile
    epoch: int = 0
    measured_samples_per_s: tuple[float, ...] | None = None
    current: Allocation | None = None
    profiled_samples_per_s: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Allocation:
    """A method's data allocation: per-worker data share and per-step batch size.

    ``shares`` are fractions of the training set (non-negative, summing to 1). With
    ``partition="iid_shards"`` worker *j* gets a disjoint random shard of ``shares[j]·N``
    samples; with ``"full_shuffle"`` every worker streams the whole set in its own order and
    ``shares`` only records the intended split of work. ``speeds`` (samples/s per worker) records
    what a speed-aware method based the split on, for the logs; it takes no part in equality.
    """

    shares: tuple[float, ...]
    batch_sizes: tuple[int, ...]
    partition: PartitionKind = "iid_shards"
    speeds: tuple[float, ...] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if len(self.shares) != len(self.batch_sizes):
            raise ValueError("Allocation: shares and batch_sizes differ in length")
        if any(s < 0 for s in self.shares) or abs(sum(self.shares) - 1.0) > 1e-6:
            raise ValueError(f"Allocation: shares must be >= 0 and sum to 1, got {self.shares}")
        if any(b < 0 for b in self.batch_sizes):
            raise ValueError(f"Allocation: negative batch size in {self.batch_sizes}")
        if self.speeds is not None and len(self.speeds) != len(self.shares):
            raise ValueError("Allocation: speeds and shares differ in length")

    @staticmethod
    def equal(world_size: int, batch_sizes: Sequence[int]) -> Allocation:
        """Equal shares; the per-rank batch sizes as configured."""
        return Allocation(tuple([1.0 / world_size] * world_size), tuple(int(b) for b in batch_sizes))

    @staticmethod
    def proportional_to_batch(batch_sizes: Sequence[int]) -> Allocation:
        """Shares proportional to batch size, so every worker finishes its shard in the same steps."""
        total = float(sum(batch_sizes))
        return Allocation(tuple(b / total for b in batch_sizes), tuple(int(b) for b in batch_sizes))


@dataclass(frozen=True)
class ClusterLayout:
    """Read-only layout of the emulated cluster (``ctx.cluster``): which node each rank is on.

    What a topology-aware method needs (e.g. gossip within a node before crossing the NIC): ranks on one
    node share its NIC, whose bandwidth concurrent flows split (:mod:`distrepro.timing.network`).
    """

    world_size: int
    node_of_rank: tuple[int, ...]  # node index of every rank
    node_names: tuple[str, ...]
    #: "gpu" | "cpu" per rank, so a method can pick its communicator at setup (DDP on the GPUs only)
    device_kinds: tuple[str, ...] = ()

    @property
    def num_nodes(self) -> int:
        return len(self.node_names)

    def ranks_on(self, node: int) -> tuple[int, ...]:
        return tuple(r for r, n in enumerate(self.node_of_rank) if n == node)

    @property
    def ranks_per_node(self) -> tuple[int, ...]:
        return tuple(len(self.ranks_on(n)) for n in range(self.num_nodes))

    def same_node(self, a: int, b: int) -> bool:
        return self.node_of_rank[a] == self.node_of_rank[b]
