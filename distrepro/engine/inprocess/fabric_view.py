"""What the pairwise requests and the gossip agents see of the in-process fabric (:class:`Fabric
<distrepro.engine.inprocess.comm.Fabric>`), as a protocol: the fabric builds them, so they name its
parts through this view instead of importing the module that imports them."""

from __future__ import annotations

from typing import Any, Protocol

from distrepro.engine.inprocess.lanes import Lanes
from distrepro.engine.inprocess.scheduler import Scheduler
from distrepro.timing.timemodel import CommCostModel


class FabricView(Protocol):
    """The shared state of one in-process run's communication."""

    sched: Scheduler
    cost: CommCostModel
    lanes: Lanes
    world_size: int
    #: one ``InProcessComm`` per rank
    comms: list[Any]
    #: rank -> its pending ``PairRequest``
    pair_waiting: dict[int, Any]
    #: rank -> the payload it contributed to the control exchange under way
    control_arrivals: dict[int, Any]
    #: (key, sequence number) -> the first side of a pairwise exchange and its issue time
    exchanges: dict[tuple[Any, int], Any]

    def next_seq(self, rank: int, key: Any) -> int:
        """The next sequence number of ``rank``'s operations under ``key`` (matches the two sides of a swap)."""
        ...

    def charged(self, nbytes: float) -> float:
        """Bytes charged to the clock: the real payload scaled to the emulated workload."""
        ...

    def count_bytes(self, rank: int, nbytes: int) -> None:
        """Add ``nbytes`` to what ``rank`` has sent."""
        ...
