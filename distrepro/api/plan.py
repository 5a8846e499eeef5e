"""What a method says about a run before it runs: the typed result of :meth:`distrepro.api.Method.plan`.

Why typed: ``distrepro plan`` prices what a method sends with the time model, so the harness must read the
traffic exactly, not guess it from magic keys of a dict. A method lists its :class:`Transfer` s (a pattern, the
bytes of one occurrence as charged, how many per step, per round or per run, and which ranks take part), the
rounds it averages over where they vary (:attr:`MethodPlan.round_lengths`), and any facts of its own
(``facts``: C-ADP's solved shares, gossip's graph), shown as they are. A compressor says what it really sends
(PowerSGD's rank-r factors), from the parameter shapes in :attr:`distrepro.api.PlanSetting.parameters`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

#: how one occurrence of a transfer moves bytes, priced by :mod:`distrepro.timing` as the engines charge it:
#: collectives over the ``participants`` (``all_gather``'s bytes are the gathered vector's), ``broadcast`` from
#: the group's first rank, ``parameter_server`` a push and a pull of ``bytes`` by every participant,
#: ``p2p`` one message between two ranks, ``gossip_pair`` a swap of ``bytes`` each way between two ranks
TransferPattern = Literal[
    "all_reduce", "reduce_scatter", "all_gather", "broadcast", "parameter_server", "p2p", "gossip_pair"
]
#: what ``count`` counts occurrences per: a step, a round (:attr:`MethodPlan.round_lengths`), the whole run
TransferPer = Literal["step", "round", "run"]
#: which ranks take part: all, the first node's, or the first rank of each of the first two nodes (a message
#: across the network where there is one); ``p2p`` and ``gossip_pair`` are always between two ranks (``pair``)
Participants = Literal["world", "node", "pair"]

PATTERNS: tuple[str, ...] = TransferPattern.__args__  # type: ignore[attr-defined]
TWO_RANK_PATTERNS = ("p2p", "gossip_pair")


@dataclass(frozen=True)
class ParamShape:
    """One parameter tensor as a plan sees it (on the meta device: no memory): its name, shape and bytes per
    element. Real sizes; multiply by :attr:`~distrepro.api.PlanSetting.bytes_scale` for the bytes charged."""

    name: str
    shape: tuple[int, ...]
    dtype_bytes: int

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype_bytes


@dataclass(frozen=True)
class Transfer:
    """``count`` occurrences of ``pattern`` moving ``bytes`` (as charged, one occurrence) per ``per``.

    ``overlaps_compute``: the engine runs it during the computation (ACiD's gossip agent), so a step costs the
    longer of the two, not their sum."""

    pattern: TransferPattern
    bytes: float
    count: float = 1.0
    per: TransferPer = "step"
    participants: Participants = "world"
    overlaps_compute: bool = False

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise ValueError(f"Transfer.pattern: {self.pattern!r} is not one of {', '.join(PATTERNS)}")
        if self.bytes < 0 or self.count < 0:
            raise ValueError(f"Transfer of {self.pattern}: bytes and count must be >= 0")

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "bytes": self.bytes,
            "count": self.count,
            "per": self.per,
            "participants": "pair" if self.pattern in TWO_RANK_PATTERNS else self.participants,
            "overlaps_compute": self.overlaps_compute,
        }


@dataclass(frozen=True)
class MethodPlan:
    """What :meth:`~distrepro.api.Method.plan` returns.

    ``transfers``: everything the method sends (an empty list: it sends nothing). ``round_lengths``: the steps
    of every round in order, for transfers ``per="round"`` (Local SGD's and QSR's H); None where a method has
    no rounds or they are not known before the run (``emulated_seconds`` budget). ``not_estimated``: why its
    time cannot be estimated, where it cannot (the run's communication depends on what happens). ``facts``:
    the method's own derived constants, shown as they are (JSON-able)."""

    transfers: tuple[Transfer, ...] = ()
    round_lengths: tuple[int, ...] | None = None
    not_estimated: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def rounds(self) -> int | None:
        return len(self.round_lengths) if self.round_lengths is not None else None

    def to_json(self) -> dict[str, Any]:
        """The facts first, then the typed fields (``round_lengths``, ``rounds``, ``transfers``); a fact named like
        a typed field is refused, so a reader never wonders which one it sees."""
        clash = {"round_lengths", "rounds", "transfers", "not_estimated"} & set(self.facts)
        if clash:
            raise ValueError(f"MethodPlan.facts: {sorted(clash)} are typed fields of MethodPlan, not facts")
        out: dict[str, Any] = dict(self.facts)
        if self.round_lengths is not None:
            out |= {"rounds": len(self.round_lengths), "round_lengths": list(self.round_lengths)}
        if self.not_estimated is not None:
            out["not_estimated"] = self.not_estimated
        out["transfers"] = [t.to_json() for t in self.transfers]
        return out
