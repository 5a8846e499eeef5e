"""The communication contract of the method API: :class:`Comm`, its non-blocking :class:`Work` and groups.

Part of the method API (:mod:`distrepro.api.method` re-exports every name here; plugins import them from there).
Each engine implements :class:`Comm` (:mod:`distrepro.engine.inprocess.comm`,
:mod:`distrepro.engine.multiprocess.comm`),
and a method talks to other workers only through it, so that every byte is counted and charged.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import torch

from distrepro.api.gossip import GossipAgent, GossipEndpoint

ReduceOp = Literal["sum", "mean", "max", "min"]


@runtime_checkable
class Work(Protocol):
    """Handle of a non-blocking operation; ``wait()`` blocks until it has completed.

    On the virtual clock the operation completes at a definite virtual time; ``wait()`` moves
    the caller's clock to ``max(now, completion)`` so communication overlapped with compute
    costs only what is not hidden. After ``wait()``: ``issue_s`` (when this rank issued it),
    ``start_s`` (last member in and its lane free, :mod:`distrepro.engine.inprocess.lanes`) and ``end_s`` (completion)
    are virtual times, and ``result()`` is what the blocking call would have returned (the peer's tensor
    of an ``exchange``, the partner of a ``pair``, None for collectives).
    """

    issue_s: float
    start_s: float
    end_s: float

    def wait(self) -> None: ...

    def is_completed(self) -> bool: ...

    def result(self) -> Any: ...


@dataclass(frozen=True)
class Group:
    """A subset of ranks for group collectives (``Comm.new_group``)."""

    ranks: tuple[int, ...]
    handle: Any = field(default=None, compare=False, repr=False)


class Comm(abc.ABC):
    """Every way a method may talk to other workers.

    Each call is charged to the virtual clock by the profile's alpha-beta model for its
    pattern, and its bytes are counted. Tensors are modified in place where noted, like
    ``torch.distributed``, and non-blocking calls (``async_op=True``) have its semantics on every
    engine: the inputs are taken when the call is issued, the results land in the tensors at
    ``Work.wait()`` (changing either in between does not change the result). Collectives must be
    called by every member of the group in the same order; a collective starts when its last
    member arrives and the others' wait is recorded as idle time.
    """

    rank: int
    world_size: int

    # collectives --------------------------------------------------------------------
    @abc.abstractmethod
    def all_reduce(
        self, tensor: torch.Tensor, op: ReduceOp = "sum", group: Group | None = None, async_op: bool = False
    ) -> Work | None:
        """Ring all-reduce of ``tensor`` in place."""

    @abc.abstractmethod
    def all_reduce_coalesced(
        self,
        tensors: Sequence[torch.Tensor],
        op: ReduceOp = "sum",
        group: Group | None = None,
        async_op: bool = False,
    ) -> Work | None:
        """All-reduce several tensors as one flat bucket (one message, one latency)."""

    @abc.abstractmethod
    def weighted_average(
        self,
        tensors: Sequence[torch.Tensor],
        weight: float,
        group: Group | None = None,
        async_op: bool = False,
    ) -> Work | None:
        """In place ``x ← Σ_j w_j x_j / Σ_j w_j`` over the group (exact sample-weighted averaging).

        Charged as one ring all-reduce of the bucket plus one scalar.
        """

    @abc.abstractmethod
    def broadcast(
        self, tensor: torch.Tensor, src: int, group: Group | None = None, async_op: bool = False
    ) -> Work | None:
        """Binomial-tree broadcast from ``src`` in place."""

    @abc.abstractmethod
    def reduce_scatter(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        op: ReduceOp = "sum",
        group: Group | None = None,
        async_op: bool = False,
    ) -> Work | None:
        """Ring reduce-scatter (``torch.distributed.reduce_scatter_tensor``): ``input`` is 1-D with
        ``p·m`` elements on every member; member *i* of the group gets elements ``[i·m, (i+1)·m)`` of
        the reduction in ``output`` (1-D, ``m`` elements). Charged as a ring reduce-scatter of the
        whole ``input`` (ZeRO's gradient pattern).
        """

    @abc.abstractmethod
    def all_gather(
        self, output: torch.Tensor, input: torch.Tensor, group: Group | None = None, async_op: bool = False
    ) -> Work | None:
        """Ring all-gather (``torch.distributed.all_gather_into_tensor``): every member's 1-D ``input``
        (``m`` elements) lands at ``[i·m, (i+1)·m)`` of ``output`` (``p·m``) on every member, in group
        order. Charged as a ring all-gather (ZeRO's parameter pattern).
        """

    @abc.abstractmethod
    def all_gather_object(self, obj: Any, group: Group | None = None) -> list[Any]:
        """Gather a small picklable object from every member (control traffic, e.g. speeds)."""

    @abc.abstractmethod
    def barrier(self, group: Group | None = None) -> None:
        """Wait for every member."""

    @abc.abstractmethod
    def new_group(self, ranks: Sequence[int]) -> Group:
        """A group of ranks. Every rank must call it with the same ``ranks``, in the same order."""

    # point to point ---------------------------------------------------------------
    @abc.abstractmethod
    def exchange(self, peer: int, tensor: torch.Tensor, async_op: bool = False) -> Any:
        """Swap ``tensor`` with ``peer`` (both call it); returns the peer's tensor (a new tensor).

        Charged as one full-duplex point-to-point transfer on the link between the two, on the pair's
        lane. ``async_op=True``: returns a :class:`Work` at once (``tensor`` is taken at issue); its
        ``result()`` after ``wait()`` is the peer's tensor, so gossip can move while gradients are computed.
        """

    @abc.abstractmethod
    def pair(self, neighbors: Sequence[int], async_op: bool = False) -> Any:
        """Ask the pairing coordinator for a partner among ``neighbors`` that is also asking.

        Blocks until a neighbour that lists this worker is ready (asynchronous gossip, as the
        A²CiD² reference orchestrator does); returns its rank, or ``None`` if every neighbour
        has finished training. The wait is recorded as idle time; pairing itself is free.
        ``async_op=True``: returns a :class:`Work` at once; the rank counts as asking from its issue time,
        and ``result()`` after ``wait()`` is the partner (or None).
        """

    def gossip_agent(self, neighbors: Sequence[int], endpoint: GossipEndpoint) -> GossipAgent | None:
        """A communication agent that gossips with ``neighbors`` beside this worker's computation
        (:mod:`distrepro.api.gossip`), or None where the engine cannot model one: the method then interleaves
        :meth:`pair` and :meth:`exchange` between its gradients. Call once, at setup."""
        return None

    # parameter server -------------------------------------------------------------
    @abc.abstractmethod
    def ps_sync(
        self,
        tensors: Sequence[torch.Tensor],
        weight: float,
        group: Group | None = None,
        receive: Literal["collective", "async"] = "collective",
    ) -> None:
        """Push to a parameter server and pull back the ``weight``-weighted average, in place.

        Charged as the parameter-server pattern: every worker pushes and pulls the bucket
        over its own server link while the server link serialises all of them. ``receive="async"``:
        the server takes each push as it arrives, so a worker that arrives early pushes while the
        others still compute (:meth:`distrepro.timing.timemodel.CommCostModel.parameter_server_async`; in-process
        engine only).
        """

    # accounting ---------------------------------------------------------------------
    @abc.abstractmethod
    def charge(self, pattern: str, nbytes: float, group: Group | None = None, async_op: bool = False) -> Work | None:
        """Accounting only: advance the clock and byte count as ``pattern`` on ``nbytes`` would, moving no data.

        For arms whose communication is done by an external library (a real DeepSpeed engine) that
        cannot go through this interface: they charge what that library sent. A collective (every
        member calls it in the same order; start = last arrival). ``pattern``: ``all_reduce``,
        ``reduce_scatter``, ``all_gather``, ``parameter_server`` (:data:`distrepro.timing.charges.PATTERNS`);
        ``nbytes``: real bytes of the whole vector (all-gather: the gathered output), scaled like any call.
        ``async_op=True`` returns a :class:`Work` (the charge runs on the group's lane meanwhile).
        """

    @property
    @abc.abstractmethod
    def bytes_sent(self) -> int:
        """Bytes this worker has sent so far (as charged, i.e. of the emulated workload)."""
