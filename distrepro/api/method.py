"""The method API: the one typed contract between the harness and a method plugin.

Split of responsibilities (as in AlgoPerf's ``spec.py``):

* the **harness** owns data loading, model construction, the loss, evaluation, budgets, the
  virtual clock and logging;
* the **method** owns data allocation (per-worker share and batch size), local optimisation
  and communication.

The contract is split by concept: data allocation in :mod:`distrepro.api.allocation`, communication in
:mod:`distrepro.api.collectives`, the rest (parameters, the worker context, :class:`Method`) here. Plugins
import every name from the package, ``from distrepro import api`` (:mod:`distrepro.api`), never from these
modules.

A method is written once, per worker, in plain blocking style ("SPMD"): the same code runs on
the in-process engine (K virtual workers in one process, ordered by virtual time) and on the
torch.distributed engine (one process per worker). It may communicate *only* through
``ctx.comm`` so that every byte is counted and charged to the clock, and it may compute
gradients only through ``ctx.forward_backward`` so that every sample is charged too.
"""

from __future__ import annotations

import abc
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, NamedTuple, Protocol, TypeVar

import torch

from distrepro.api.allocation import Allocation, ClusterLayout, ClusterView, DeviceView, PartitionKind
from distrepro.api.collectives import Comm, Group, ReduceOp, Work
from distrepro.api.gossip import GossipAgent, GossipEndpoint
from distrepro.api.lr_schedule import LRSchedule
from distrepro.api.optimizer_config import OptimizerConfig
from distrepro.api.params import (
    LearningRate,
    MethodParams,
    Momentum,
    NonNegativeFloat,
    PeakLR,
    PositiveFloat,
    PositiveInt,
    WeightDecay,
    optimizer_field,
    peak_lr_field,
)
from distrepro.api.plan import MethodPlan, ParamShape

__all__ = [
    "Allocation",
    "Batch",
    "ClockView",
    "ClusterLayout",
    "ClusterView",
    "Comm",
    "DeviceView",
    "GossipAgent",
    "GossipEndpoint",
    "Group",
    "LRSchedule",
    "LearningRate",
    "Method",
    "MethodParams",
    "Momentum",
    "NonNegativeFloat",
    "OptimizerConfig",
    "PartitionKind",
    "PeakLR",
    "PlanSetting",
    "PositiveFloat",
    "PositiveInt",
    "ReduceOp",
    "WeightDecay",
    "Work",
    "WorkerContext",
]


class Batch(NamedTuple):
    """One mini-batch for one worker: ``inputs`` (N, C, H, W) and integer ``targets`` (N,)."""

    inputs: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:  # number of samples, not the tuple length
        return int(self.targets.shape[0])


#: a method's hyperparameter model: ``class Method(api.Method[MyParams])`` types ``self.params`` as ``MyParams``
P = TypeVar("P", bound=MethodParams)
#: ``ctx.register_optimizer(opt)`` hands back the very optimizer, typed as it was
OptimizerT = TypeVar("OptimizerT", bound=torch.optim.Optimizer)


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
    #: communication depends on the LR (QSR's period) plans from it; None when the method declares no peak LR
    lr_schedule: LRSchedule | None = None
    #: which node each rank is on (``ctx.cluster`` of the run), for a method whose traffic follows the nodes
    layout: ClusterLayout | None = None
    #: every parameter tensor (name, shape, bytes per element), in backward order (the reverse of
    #: ``model.parameters()``, the order DDP fills its buckets in), for a method that sends less than the whole
    #: model (a compressor's low-rank factors); sizes are real: times ``bytes_scale`` they are as charged
    parameters: tuple[ParamShape, ...] = ()
    #: charged bytes per real byte (the emulated workload's model over the trained one; 1.0 without one)
    bytes_scale: float = 1.0


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
    ``budget`` (the run config's :class:`~distrepro.config.run_config.Budget`: ``unit``, ``amount``); a method can
    read the harness state but not write it. The run's length in steps is :attr:`total_steps`.
    """

    rank: int
    world_size: int
    model: torch.nn.Module
    device: torch.device
    comm: Comm
    rng: torch.Generator

    @property
    def clock(self) -> ClockView:
        """Read-only: a method reads the time; only the harness and ``comm`` advance it."""
        ...

    @property
    def train_state(self) -> Mapping[str, Any]:
        """Read-only progress (see the class docstring)."""
        ...

    #: the LR of the step about to run: the harness's schedule (``schedule:``; constant at the peak LR
    #: without one) at this worker's step count; None when neither the method nor the config names an LR
    lr: float | None
    #: the run's length in steps (``budget`` in steps, epochs or samples over the first allocation's global
    #: batch); None for an ``emulated_seconds`` budget, whose steps are not known before they are taken
    total_steps: int | None
    #: the run's schedule bound to it (:class:`LRSchedule`: ``lr(t)`` for any step, ``warmup_steps``), for a
    #: method whose communication depends on the LR; None when no peak LR is declared (:data:`PeakLR`)
    lr_schedule: LRSchedule | None

    def register_optimizer(self, optimizer: OptimizerT) -> OptimizerT:
        """Hand the harness an optimizer whose LR it sets from ``schedule:`` before every step; returns it.

        A method that owns its LR (no torch optimizer, or a schedule of its own) registers nothing and may
        read :attr:`lr`. Without ``schedule:`` in the config the harness writes no LR at all.
        """
        ...

    def build_optimizer(
        self, parameters: Iterable[torch.Tensor] | Iterable[dict[str, Any]], default: OptimizerConfig
    ) -> torch.optim.Optimizer:
        """Build and register the optimizer ``default`` names (``api.OptimizerConfig(name="adamw", lr=...)``, or
        ``api.method_optimizer(params)``: SGD from the params' peak LR, ``momentum``, ``weight_decay``,
        ``nesterov``), with the run config's ``optimizer:`` fields overlaid (set ``accepts_optimizer = True``
        on the method, or such a config is refused)."""
        ...

    #: read-only layout of the emulated cluster: node of each rank, ranks per node
    cluster: ClusterLayout

    def forward_backward(
        self,
        batch: Batch,
        zero_grad: bool = True,
        forward_with: Callable[[torch.Tensor], torch.Tensor] | None = None,
        on_bucket: Callable[[int, list[torch.nn.Parameter]], None] | None = None,
        backward: bool = True,
    ) -> float:
        """Forward and backward pass with the harness's loss; gradients land in ``model``.

        ``on_bucket(i, params)``: called back at the virtual time gradient bucket ``i`` (DDP's 25 MB buckets,
        reverse parameter order) would be ready in backward, so a method can launch non-blocking
        communication that overlaps the rest of backward (:mod:`distrepro.api.overlap`). The gradients are final.
        With an emulated workload the buckets are the emulated model's: ``params`` are the proxy's parameters dealt
        to bucket ``i`` and may be none (a proxy with fewer tensors than the emulated model has buckets); launch the
        bucket's collective anyway (over an empty payload): a collective issued in the callback is charged the
        emulated bucket's bytes.

        Charges the compute time of ``len(batch)`` samples on this worker's device to the
        clock and returns the mean loss of the batch. ``forward_with`` runs the forward through
        a wrapper of ``model`` instead of ``model`` itself (a DeepSpeed engine, whose backward
        hooks must see the graph); it must compute ``model``'s function, as that is what is charged.

        ``backward=False``: for a method that would throw the gradients away (A²CiD²'s pure-gossip arms). The
        forward runs without autograd (the loss, BatchNorm statistics and any dropout draws are those of the full
        call), no backward runs and no gradient is written, yet the whole forward and backward is charged: the
        emulated clock and every metric are as with the gradients. Not with ``on_bucket``.
        """
        ...

    def seed(self, *parts: object) -> int:
        """A seed derived from this run, this rank and ``parts`` (never draw your own)."""
        ...

    def record(self, name: str, value: float) -> None:
        """Record a method-specific scalar (e.g. the current sync period H) for logging.

        Each rank keeps its latest value per ``name``. At every evaluation the harness reports, on
        every engine alike, ``<name>`` = the mean over the ranks that recorded it (summed in rank
        order) and ``<name>/rank<i>`` = rank *i*'s own value, logged as ``method/<name>`` (every evaluation) and
        ``method/<name>/rank<i>`` (the final evaluation only; the run's ``evals.csv`` has every evaluation's)
        (:func:`distrepro.engine.rank_reports.aggregate_records`).
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
    ``class Method(api.Method[MyParams])``. The type argument is the one place the model is named: it sets
    :attr:`Params` (see :meth:`__init_subclass__`); a class setting ``Params`` itself is refused.
    """

    #: short name, same as the plugin folder (the registry sets it from the folder when a plugin omits it)
    name: ClassVar[str]
    #: pydantic model of the hyperparameters (defaults = paper values): set from the type argument, never by hand
    Params: ClassVar[type[MethodParams]] = MethodParams
    #: lockstep methods do the same number of steps on every worker (stop decisions are
    #: taken together); asynchronous methods let each worker run at its own pace and stop
    #: on the global budget.
    synchronous: ClassVar[bool] = True
    #: what a step exchanges, which decides which of the emulator's validated errors its emulated time carries
    #: (``hardware_profiles/validation/emulator_error.yaml``): ``all_reduce`` (a collective over every worker: DDP,
    #: Local SGD's averaging, a ring), ``neighbour`` (a decentralised exchange with a few peers: gossip, a
    #: topology's neighbours), ``parameter_server`` (workers to a server and back) or ``none``
    exchange: ClassVar[Literal["all_reduce", "neighbour", "parameter_server", "none"]] = "all_reduce"
    #: where the method's training loop makes the host wait for the GPU, which a profile's ``host_sync_ms`` charges:
    #: ``per_step`` (every loop: the loss read back, AMP's overflow check) or ``per_bucket`` (also after each bucket's
    #: optimizer update inside backward, as Decent-DP's hooks do)
    host_syncs: ClassVar[Literal["per_step", "per_bucket"]] = "per_step"
    #: modules the method needs beyond the core install → how to get them; checked when a run is
    #: configured, so a missing optional extra is one clear error instead of one per started rank
    requires: ClassVar[Mapping[str, str]] = {}
    #: the method builds its optimizer with ``ctx.build_optimizer``, so a run config's ``optimizer:``
    #: reaches it; a config giving ``optimizer:`` to any other method is refused (it would be ignored)
    accepts_optimizer: ClassVar[bool] = False
    #: the params of the generated tests (``tests/plugins/``: the smoke campaign of 10 steps, the engine
    #: agreement, the checkpoint round trip): values that make the method's periodic logic run within a few
    #: steps (Local SGD: ``Params(period=3)``); None: the defaults (the paper's values)
    smoke_params: ClassVar[MethodParams | None] = None
    #: generated tests this method opts out of, each with the reason: ``"engine_agreement"`` (the in-process and
    #: distributed runs are compared; e.g. an external library that runs on one engine only) and
    #: ``"checkpoint"`` (a run resumed from a checkpoint equals the uninterrupted one; asynchronous methods
    #: cannot resume and are left out without saying so)
    test_opt_outs: ClassVar[Mapping[Literal["engine_agreement", "checkpoint"], str]] = {}
    #: where this re-implementation is checked against its authors' code: the test and the code it compares with
    #: (``tests/methods/test_x.py against github org/repo @ commit``); empty: not checked, so a report says that a
    #: verdict on the method's own arm is about our re-implementation, not about the paper
    #: (:mod:`distrepro.claims.attribution`)
    reference_check: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Take :attr:`Params` from the type argument (``Method[MyParams]``); refuse ``Params = ...`` in the body
        and a model declaring two peak LRs. A TypeError here is reported by the registry as a failed plugin."""
        super().__init_subclass__(**kwargs)
        if "Params" in cls.__dict__:
            what = f"{cls.__qualname__} sets Params"
            raise TypeError(f"{what}; name the params model once, as the type argument: Method[{cls.Params.__name__}]")
        for base in cls.__dict__.get("__orig_bases__", ()):
            origin = typing.get_origin(base)
            if not (isinstance(origin, type) and issubclass(origin, Method)):
                continue
            (arg,) = typing.get_args(base)
            if isinstance(arg, type) and issubclass(arg, MethodParams):  # not a TypeVar of a generic base
                cls.Params = arg
        peak_lr_field(cls.Params)
        optimizer_field(cls.Params)
        if cls.host_syncs not in ("per_step", "per_bucket"):
            raise TypeError(f"{cls.__qualname__}.host_syncs is {cls.host_syncs!r}: 'per_step' or 'per_bucket'")

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
    def evaluated_on(cls, params: P) -> Literal["average", "rank0"]:
        """Which model the harness evaluates for these params, on every engine and for asynchronous methods
        too (whose ranks reach an evaluation point each at its own step): the parameter average of all workers
        (the default: the observer's view, untimed) or rank 0's replica (AR-SGD on a subset of the devices:
        the idle ranks' replicas never move)."""
        return "average"

    @classmethod
    def trained_ranks(cls, params: P, device_kinds: tuple[str, ...]) -> tuple[int, ...] | None:
        """The ranks whose replicas train, over which the consensus distance is taken; None (default):
        every rank. A method that leaves devices idle names the others (AR-SGD on the GPUs alone: the
        idle CPU replicas never move, and counting them would report a spread training never had)."""
        return None

    @classmethod
    def warmup_steps(cls, params: P) -> int:
        """Timed warm-up steps per worker before the first :meth:`allocate` (0 = none, the default).

        For methods that allocate from *profiled* speeds (C-ADP): the harness then fills
        ``ClusterView.profiled_samples_per_s`` (:mod:`distrepro.timing.warmup_profile`). Not charged to the clock.
        """
        return 0

    @classmethod
    def plan(cls, params: P, setting: PlanSetting) -> MethodPlan | None:
        """What a run of this method will do, said before it runs (``distrepro plan``); None: it cannot say.

        A pure function of its inputs returning an :class:`~distrepro.api.MethodPlan`: the :class:`Transfer` s it
        sends (pattern, bytes as charged, how many per step, round or run, which ranks), which ``distrepro plan``
        prices with the time model; the rounds, where transfers are per round; the method's own derived
        constants as ``facts``, shown as they are (Local SGD's period, C-ADP's solved shares).
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

    def skip(self, cluster: ClusterLayout) -> str | None:
        """Return a reason if this method cannot run on this cluster (benchopt's ``skip``): its world size
        (``cluster.world_size``) or its layout (a topology that needs two or more nodes). Checked before any
        worker starts, and by the generated tests, which then skip the method rather than fail."""
        return None
