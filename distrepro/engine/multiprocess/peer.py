"""The point-to-point half of :class:`~distrepro.engine.multiprocess.comm.DistComm`: pairwise exchanges, the
pairing coordinator's answers, and the gossip agent's swaps on its own process group.

A mixin, apart from the collectives because pairwise traffic carries its clock differently: the sender's
virtual clock rides at the end of the exchanged vector (two float slots), and an exchange starts when the later
of the two peers issued it. Charges follow :func:`distrepro.timing.charges.exchange`, as in the in-process engine.

*receive_first_swap*: every swap lists its receive before its send. gloo moves a payload only once the peer's
"ready to receive" notice has arrived, and writes that notice behind whatever the rank has already queued on the
connection (facebookincubator/gloo ``gloo/transport/tcp/pair.cc``: ``Pair::send`` parks a send until
``shiftRemotePendingRecv``; ``Pair::recv`` writes the notice through ``sendAsyncMode``, behind the connection's
``tx_`` queue). Posted send first, the later rank's notice waits behind its own payload and the two directions take
turns: the swap measured 2·S/B through shaped links, and m pairs through one NIC between m·S/B and 2m·S/B by the
order the ranks happened to arrive in. Posted receive first, both notices leave before either payload: S/B, the
full-duplex swap the emulator charges (BENCHMARKS.md, "Shaped links"). NCCL coalesces the batch, so the order is
moot there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from distrepro.api.gossip import GossipEndpoint, check_neighbors
from distrepro.api.method import Group
from distrepro.engine.clock import VirtualClock
from distrepro.engine.multiprocess.agent import DistAgent
from distrepro.engine.multiprocess.pairing import PairingClient
from distrepro.engine.multiprocess.work import DistWork, PairWork, clock_slots, clocks_from, nbytes_of
from distrepro.errors import CommError
from distrepro.timing import charges
from distrepro.timing.timemodel import CommCostModel


class PeerOps:
    """Pairwise operations of a rank's ``Comm``; the state and helpers below are :class:`DistComm`'s."""

    rank: int
    world_size: int
    clock: VirtualClock
    cost: CommCostModel
    bytes_scale: float
    pairing: PairingClient | None
    gossip_group: Any
    timeout: Any
    _world: Group
    _bytes: int
    _to_wire: Callable[[torch.Tensor], torch.Tensor]
    _issued: Callable[[charges.Charge], tuple[float, int]]
    _finish: Callable[..., None]
    _lanes: dict[Any, DistWork]
    _capture: list[tuple[float, float, int]] | None
    _apply: Callable[..., None]  # (start, end, sent[, backward, issue_s]): DistComm._apply

    def exchange(self, peer: int, tensor: torch.Tensor, async_op: bool = False):
        if peer == self.rank or not 0 <= peer < self.world_size:
            raise ValueError(f"rank {self.rank}: invalid exchange peer {peer}")
        flat = tensor.detach().reshape(-1)
        dtype = flat.dtype if flat.dtype in (torch.float32, torch.float64) else torch.float32
        mine = self._to_wire(torch.cat([flat.to(dtype), clock_slots(self.clock.t, 0, 1, dtype).to(flat.device)]))
        theirs = torch.empty_like(mine)
        ops = [  # receive posted first: full duplex on gloo (receive_first_swap)
            dist.P2POp(dist.irecv, theirs, peer, group=self._world.handle),
            dist.P2POp(dist.isend, mine, peer, group=self._world.handle),
        ]
        reqs = dist.batch_isend_irecv(ops)
        issued = self.clock.t
        seconds, sent = self._issued(
            charges.exchange(self.cost, self.rank, peer, nbytes_of([tensor]) * self.bytes_scale)
        )

        class _All:
            def wait(self) -> None:
                for req in reqs:
                    req.wait()

        handle: DistWork

        def finish() -> None:
            start = max(issued, clocks_from(theirs[-2:])[0])
            handle.value = theirs[:-2].to(tensor.device, tensor.dtype).view_as(tensor)
            self._finish(start, seconds, sent)

        handle = DistWork(self, finish, _All(), ("p", min(self.rank, peer), max(self.rank, peer)))
        if async_op:
            return handle
        handle.wait()
        return handle.value

    def pair(self, neighbors: Sequence[int], async_op: bool = False):
        """Non-blocking pairing asks the coordinator at issue (as the in-process engine registers the rank
        then) and returns at once; ``wait()`` blocks (in real time) for the answer and idles the clock until
        the pairing's virtual time. Waiting for the answer at issue instead would deadlock a rank whose
        partner needs it in a collective before it asks."""
        if self.pairing is None:
            raise CommError("pair() needs the pairing coordinator (asynchronous methods only)")
        issued = self.clock.t
        k = self.pairing.ask(list(neighbors), issued)
        if not async_op:
            peer, peer_t = self.pairing.answer(k, issued)
            if peer is not None:
                self.clock.idle_until(peer_t)  # as in-process: wait until the partner is ready
            return peer
        pairing = self.pairing
        return PairWork(self.clock, issued, lambda: pairing.answer(k, issued))

    def gossip_agent(self, neighbors: Sequence[int], endpoint: GossipEndpoint) -> DistAgent:
        if self.pairing is None or self.gossip_group is None:
            raise CommError("gossip_agent() needs the pairing coordinator (asynchronous methods only)")
        check_neighbors(self.rank, self.world_size, neighbors)
        timeout_s = self.timeout.total_seconds() if self.timeout is not None else 300.0
        return DistAgent(
            self.rank, neighbors, endpoint, self.clock, self.pairing, self._swap, self._charge_exchange, timeout_s
        )

    def _swap(self, peer: int, vector: torch.Tensor) -> torch.Tensor:
        """Send ``vector`` to ``peer`` and receive its vector, on the gossip group (the agent's thread)."""
        mine = self._to_wire(vector.detach().reshape(-1))
        theirs = torch.empty_like(mine)
        ops = [  # receive posted first: full duplex on gloo (receive_first_swap)
            dist.P2POp(dist.irecv, theirs, peer, group=self.gossip_group),
            dist.P2POp(dist.isend, mine, peer, group=self.gossip_group),
        ]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        return theirs.to(vector.device, vector.dtype).view_as(vector)

    def _charge_exchange(self, peer: int, vector: torch.Tensor) -> float:
        """The modelled seconds of one exchange of ``vector`` with ``peer`` (its bytes are counted here)."""
        seconds, sent = charges.exchange(self.cost, self.rank, peer, nbytes_of([vector]) * self.bytes_scale)
        self._bytes += sent
        return seconds
