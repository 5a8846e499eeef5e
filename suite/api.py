"""The method API: the one typed contract between the harness and a method plugin.

Split of responsibilities (as in AlgoPerf's ``spec.py``):

* the **harness** owns data loading, model construction, the loss, evaluation, budgets, the
  virtual clock and logging;
* the **method** owns data allocation (per-worker share and batch size), local optimisation
  and communication.

A method is written once, per worker, in plain blocking style ("SPMD"): the same code runs on
the in-process engine (K virtual workers in one process, ordered by virtual time) and on the
torch.distributed engine (one process per worker). It may communicate *only* through
``ctx.comm`` so that every byte is counted and charged to the clock, and it may compute
gradients only through ``ctx.forward_backward`` so that every sample is charged too.
"""

from __future__ import annotations

import abc
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Generic, Literal, NamedTuple, Protocol, TypeVar, runtime_checkable

import torch
from pydantic import BaseModel, ConfigDict, Field

ReduceOp = Literal["sum", "mean", "max", "min"]
PartitionKind = Literal["iid_shards", "full_shuffle"]


class Batch(NamedTuple):
    """One mini-batch for one worker: ``inputs`` (N, C, H, W) and integer ``targets`` (N,)."""

    inputs: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:  # number of samples, not the tuple length
        return int(self.targets.shape[0])


class MethodParams(BaseModel):
    """Base class of a method's hyperparameters; defaults are the paper's values.

    Unknown keys are rejected so that a typo in a config (``lr`` vs ``lrr``) is an error,
    not a silently ignored setting; so are infinite and NaN floats. Params are validated when the
    config is loaded, before any run starts: declare each field's range (:data:`LearningRate`,
    ``Field(ge=1)``, ...) so that a bad value is a config error naming the field, not an error
    inside a worker once the run is under way (``torch.optim`` checks ``lr`` only when built).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


#: the SGD hyperparameters most methods share, with the ranges ``torch.optim.SGD`` accepts
#: (momentum below 1: at 1 or more the momentum buffer never forgets and the run diverges)
LearningRate = Annotated[float, Field(gt=0)]
Momentum = Annotated[float, Field(ge=0, lt=1)]
WeightDecay = Annotated[float, Field(ge=0)]
PositiveInt = Annotated[int, Field(ge=1)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]


#: a method's hyperparameter model: ``class Method(api.Method[MyParams])`` types ``self.params`` as ``MyParams``
P = TypeVar("P", bound=MethodParams)


# --------------------------------------------------------------------------- allocation


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
    node share its NIC, whose bandwidth concurrent flows split (:mod:`suite.network`).
    """

    world_size: int
    node_of_rank: tuple[int, ...]  # node index of every rank
    node_names: tuple[str, ...]

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


# --------------------------------------------------------------------------- communication


@runtime_checkable
class Work(Protocol):
    """Handle of a non-blocking operation; ``wait()`` blocks until it has completed.

    On the virtual clock the operation completes at a definite virtual time; ``wait()`` moves
    the caller's clock to ``max(now, completion)`` so communication overlapped with compute
    costs only what is not hidden. After ``wait()``: ``issue_s`` (when this rank issued it),
    ``start_s`` (last member in and its lane free, :mod:`suite.engine.lanes`) and ``end_s`` (completion)
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

    # parameter server -------------------------------------------------------------
    @abc.abstractmethod
    def ps_sync(self, tensors: Sequence[torch.Tensor], weight: float, group: Group | None = None) -> None:
        """Push to a parameter server and pull back the ``weight``-weighted average, in place.

        Charged as the parameter-server pattern: every worker pushes and pulls the bucket
        over its own server link while the server link serialises all of them.
        """

    # accounting ---------------------------------------------------------------------
    @abc.abstractmethod
    def charge(self, pattern: str, nbytes: float, group: Group | None = None, async_op: bool = False) -> Work | None:
        """Accounting only: advance the clock and byte count as ``pattern`` on ``nbytes`` would, moving no data.

        For arms whose communication is done by an external library (a real DeepSpeed engine) that
        cannot go through this interface: they charge what that library sent. A collective (every
        member calls it in the same order; start = last arrival). ``pattern``: ``all_reduce``,
        ``reduce_scatter``, ``all_gather``, ``parameter_server`` (:data:`suite.engine.charges.PATTERNS`);
        ``nbytes``: real bytes of the whole vector (all-gather: the gathered output), scaled like any call.
        ``async_op=True`` returns a :class:`Work` (the charge runs on the group's lane meanwhile).
        """

    @property
    @abc.abstractmethod
    def bytes_sent(self) -> int:
        """Bytes this worker has sent so far (as charged, i.e. of the emulated workload)."""


@dataclass(frozen=True)
class PlanSetting:
    """Input to :meth:`Method.plan`: the run as resolved before training (no data read, nothing trained).

    ``total_steps`` is None for an ``emulated_seconds`` budget; byte counts are as charged (scaled to
    the emulated workload): ``model_bytes`` the parameters, ``state_bytes`` parameters and floating buffers.
    """

    cluster: ClusterView
    allocation: Allocation
    total_steps: int | None
    steps_per_epoch: float
    model_bytes: float
    state_bytes: float
    #: the run's LR schedule bound to it (``lr(t)`` for any step, ``warmup_steps``): a method whose
    #: communication depends on the LR (QSR's period) plans from it; None when the method names no LR
    lr_schedule: Any = None


# --------------------------------------------------------------------------- worker context


class ClockView(Protocol):
    """Read-only view of one worker's virtual clock (seconds)."""

    def now(self) -> float: ...

    @property
    def compute_s(self) -> float: ...

    @property
    def comm_s(self) -> float: ...

    @property
    def idle_s(self) -> float: ...


class WorkerContext(Protocol):
    """What the harness hands a method on one worker.

    ``train_state`` is a read-only mapping (``types.MappingProxyType``) with ``step`` (local
    steps done), ``epoch`` (global, fractional), ``samples`` (global samples processed) and
    ``budget``; a method can read the harness state but not write it.
    """

    rank: int
    world_size: int
    model: torch.nn.Module
    device: torch.device
    comm: Comm
    clock: ClockView
    rng: torch.Generator
    train_state: Mapping[str, Any]
    #: the LR of the step about to run: the harness's schedule (``schedule:``; constant at the peak LR
    #: without one) at this worker's step count; None when neither the method nor the config names an LR
    lr: float | None
    #: the run's length in steps (``budget`` in steps, epochs or samples over the first allocation's global
    #: batch); None for an ``emulated_seconds`` budget, whose steps are not known before they are taken
    total_steps: int | None
    #: the run's schedule bound to it (:class:`suite.lr_schedule.LRSchedule`: ``lr(t)`` for any step,
    #: ``warmup_steps``), for a method whose communication depends on the LR; None when no LR is named
    lr_schedule: Any

    def register_optimizer(self, optimizer: Any) -> Any:
        """Hand the harness an optimizer whose LR it sets from ``schedule:`` before every step; returns it.

        A method that owns its LR (no torch optimizer, or a schedule of its own) registers nothing and may
        read :attr:`lr`. Without ``schedule:`` in the config the harness writes no LR at all.
        """
        ...

    def build_optimizer(self, parameters: Any, default: Any) -> torch.optim.Optimizer:
        """Build and register the optimizer ``default`` (a :class:`suite.optimizers.OptimizerConfig`) names,
        with the run config's ``optimizer:`` fields overlaid (set ``accepts_optimizer = True`` on the method)."""
        ...

    #: read-only layout of the emulated cluster: node of each rank, ranks per node
    cluster: ClusterLayout

    def forward_backward(
        self,
        batch: Batch,
        zero_grad: bool = True,
        forward_with: Callable[[torch.Tensor], torch.Tensor] | None = None,
        on_bucket: Callable[[int, list[torch.nn.Parameter]], None] | None = None,
    ) -> float:
        """Forward and backward pass with the harness's loss; gradients land in ``model``.

        ``on_bucket(i, params)``: called back at the virtual time gradient bucket ``i`` (DDP's 25 MB buckets,
        reverse parameter order) would be ready in backward, so a method can launch non-blocking
        communication that overlaps the rest of backward (:mod:`suite.overlap`). The gradients are final.

        Charges the compute time of ``len(batch)`` samples on this worker's device to the
        clock and returns the mean loss of the batch. ``forward_with`` runs the forward through
        a wrapper of ``model`` instead of ``model`` itself (a DeepSpeed engine, whose backward
        hooks must see the graph); it must compute ``model``'s function, as that is what is charged.
        """
        ...

    def seed(self, *parts: object) -> int:
        """A seed derived from this run, this rank and ``parts`` (never draw your own)."""
        ...

    def record(self, name: str, value: float) -> None:
        """Record a method-specific scalar (e.g. the current sync period H) for logging.

        Each rank keeps its latest value per ``name``. At every evaluation the harness reports, on
        every engine alike, ``<name>`` = the mean over the ranks that recorded it (summed in rank
        order) and ``<name>/rank<i>`` = rank *i*'s own value, logged as ``method/<name>`` and
        ``method/<name>/rank<i>`` (:func:`suite.engine.reports.aggregate_records`).
        """
        ...


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


class Method(abc.ABC, Generic[P]):
    """Base class of every method plugin (``methods/<name>/method.py`` defines ``Method``).

    A fresh instance is created per worker with the validated ``params``; instance attributes
    are that worker's private state (optimizer, momentum buffers, ...).

    Generic over the hyperparameter model so that a type checker knows ``self.params`` (and the
    ``params`` of :meth:`allocate` / :meth:`warmup_steps`) is the plugin's own model without a cast:
    ``class Method(api.Method[MyParams])``. The type argument also sets :attr:`Params` when the class
    does not (see :meth:`__init_subclass__`), so the model is named once.
    """

    #: short name, same as the plugin folder (the registry sets it from the folder when a plugin omits it)
    name: ClassVar[str]
    #: pydantic model of the hyperparameters (defaults = paper values); defaults to the type argument
    Params: ClassVar[type[MethodParams]] = MethodParams
    #: lockstep methods do the same number of steps on every worker (stop decisions are
    #: taken together); asynchronous methods let each worker run at its own pace and stop
    #: on the global budget.
    synchronous: ClassVar[bool] = True
    #: which model the harness evaluates: the parameter average of all workers (observer's
    #: view, untimed) or rank 0's replica; on every engine and for asynchronous methods too,
    #: whose ranks reach an evaluation point each at its own step
    eval_on: ClassVar[Literal["average", "rank0"]] = "average"
    #: modules the method needs beyond the core install → how to get them; checked when a run is
    #: configured, so a missing optional extra is one clear error instead of one per started rank
    requires: ClassVar[Mapping[str, str]] = {}
    #: the method builds its optimizer with ``ctx.build_optimizer``, so a run config's ``optimizer:``
    #: reaches it; a config giving ``optimizer:`` to any other method is refused (it would be ignored)
    accepts_optimizer: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Take :attr:`Params` from the type argument (``Method[MyParams]``) unless the class sets it.

        Both at once must agree: a class typed for one model but validated with another would type-check
        and then fail at run time. A TypeError here is reported by the registry as a failed plugin.
        """
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            origin = typing.get_origin(base)
            if not (isinstance(origin, type) and issubclass(origin, Method)):
                continue
            (arg,) = typing.get_args(base)
            if not (isinstance(arg, type) and issubclass(arg, MethodParams)):
                continue  # a TypeVar: a generic intermediate base, parametrised further down
            declared = cls.__dict__.get("Params")
            if declared is None:
                cls.Params = arg
            elif declared is not arg:
                what = f"{cls.__qualname__} is Method[{arg.__name__}] but sets Params = {declared.__name__}"
                raise TypeError(f"{what}; name one model")

    def __init__(self, params: P) -> None:
        self.params: P = params

    @classmethod
    def allocate(cls, params: P, cluster: ClusterView) -> Allocation:
        """Data allocation: called before training and, for lockstep methods, at every epoch boundary
        (asynchronous methods keep their first allocation).

        Must be a pure function of its inputs: under the distributed engine every rank calls
        it and must get the same answer. Default: equal shares, configured batch sizes.
        """
        return Allocation.equal(cluster.world_size, cluster.batch_sizes)

    @classmethod
    def warmup_steps(cls, params: P) -> int:
        """Timed warm-up steps per worker before the first :meth:`allocate` (0 = none, the default).

        For methods that allocate from *profiled* speeds (C-ADP): the harness then fills
        ``ClusterView.profiled_samples_per_s`` (:mod:`suite.engine.warmup`). Not charged to the clock.
        """
        return 0

    @classmethod
    def plan(cls, params: P, setting: PlanSetting) -> dict[str, Any] | None:
        """What a run of this method will do, said before it runs (``distrepro plan``); None: it cannot say.

        A pure function of its inputs returning plain data (JSON-able). Key the harness reads: ``comm``, a
        list of ``{"pattern": "all_reduce", "bytes": B, "count": N}`` (bytes as charged; ``count`` over the
        whole run, or ``per_step`` instead), priced with the time model (lockstep, no overlap); any other
        key is shown as it is (Local SGD's ``round_lengths``). Without ``comm`` the run's communication time
        is "not estimated".
        """
        return None

    def setup(self, ctx: WorkerContext) -> None:
        """Create per-worker state (optimizer, buffers). Not timed."""

    @abc.abstractmethod
    def train_step(self, ctx: WorkerContext, batch: Batch) -> None:
        """One local step: ``ctx.forward_backward``, communication, update. Timed."""

    def finalize(self, ctx: WorkerContext) -> None:
        """Called once after the budget is spent, before the final evaluation. Timed.

        E.g. Local SGD averages its replicas one last time here.
        """

    def state_dict(self) -> dict[str, Any]:
        """This worker's method state for a checkpoint.

        Default: the ``state_dict`` of every optimizer attribute and every plain attribute
        (numbers, strings, booleans, None, and lists/tuples/dicts of them). Attributes holding
        tensors are left out, since they usually alias the model (restored separately); a method
        keeping tensor state of its own must override this and :meth:`load_state_dict`.
        """
        out: dict[str, Any] = {}
        for key, value in vars(self).items():
            if key == "params":
                continue
            if isinstance(value, torch.optim.Optimizer):
                out[key] = ("optimizer", value.state_dict())
            elif _plain(value):
                out[key] = ("value", value)
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (called after :meth:`setup`, so optimizers exist)."""
        for key, (kind, value) in state.items():
            if kind == "optimizer":
                getattr(self, key).load_state_dict(value)
            else:
                setattr(self, key, value)

    def skip(self, world_size: int) -> str | None:
        """Return a reason if this method cannot run at this world size (benchopt's ``skip``)."""
        return None
