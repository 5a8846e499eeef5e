"""The gossip-agent contract: pairwise averaging that runs beside a worker's computation.

Asynchronous gossip methods (A²CiD² and its AD-PSGD-like baseline) keep communicating *while* their worker
computes a gradient: the A²CiD² reference runs a separate gossip process per worker that answers a pairing
at once, swaps the flat parameter vector with its partner and averages into the shared parameters
(Hogwild), coupled to the gradient process by a barrier after every gradient ("the gradient step cannot
finish before its quota of averagings is done"; reference ``p2p_averaging.py``, ``adp.py``, commit
``89393fd`` of https://github.com/AdelNabli/ACiD).

A method cannot express that with blocking calls made between its gradients, so the engine offers a
:class:`GossipAgent` (``Comm.gossip_agent``): it pairs, exchanges and applies averagings on the worker's behalf
at their own virtual times, calling the method's :class:`GossipEndpoint` back. Both engines have one: in-process
an actor in virtual time (:mod:`distrepro.engine.inprocess.agent`), on the dist engine a thread per rank that
exchanges while the worker computes (:mod:`distrepro.engine.multiprocess.agent`). An engine without one returns None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch


class GossipEndpoint(Protocol):
    """What the engine's agent needs from the method. Called on the worker's own thread, between the worker's
    own writes (in-process: in virtual-time order while the worker is parked; dist engine: from the worker's
    agent calls), so the method's state is consistent."""

    def candidates(self) -> Sequence[int]:
        """The neighbours to try, in the order to try them (the method's random order)."""

    def snapshot(self) -> torch.Tensor:
        """The vector to send now, as it is (the reference sends x without locking or mixing it). The agent copies it
        at once, so this may be the method's live buffer (A²CiD²'s x, which its parameters are views of)."""

    def receive(self, t: float, peer: int, vector: torch.Tensor) -> None:
        """An exchange with ``peer`` ended at virtual time ``t``: average ``vector`` (the peer's vector as it
        was sent) into the worker's state."""


class GossipAgent(Protocol):
    """A worker's communication agent (worker-side calls; each parks the worker at its virtual time).

    Quota: the agent performs averagings while at least one is owed; :meth:`barrier` waits until fewer than
    one is owed (the reference's gradient/gossip barrier), then adds the next interval's quota.
    """

    def start(self, quota: float) -> None:
        """Begin gossiping with ``quota`` averagings owed for the first gradient interval."""

    def sync(self) -> None:
        """Apply every averaging that ended before now (call after computing a gradient, before stepping)."""

    def barrier(self, next_quota: float) -> int:
        """Wait until this interval's quota is done (time covered by this worker's own exchange counts as
        communication, the rest as idle), then owe ``next_quota`` more; returns the averagings completed in
        the interval."""

    def close(self) -> None:
        """Finish the exchange in flight and stop pairing (neighbours left with nobody stop too)."""


def check_neighbors(rank: int, world_size: int, neighbors: Sequence[int]) -> None:
    """Refuse a neighbour list that names the rank itself or a rank outside the world (both engines' agents)."""
    bad = [j for j in neighbors if j == rank or not 0 <= j < world_size]
    if bad:
        raise ValueError(f"rank {rank}: invalid gossip neighbours {bad}")
