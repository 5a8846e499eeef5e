"""Run configuration: one validated YAML file per experiment, plus command-line overrides.

Every field has a sensible default except the method, so a config can be four lines. Errors name
the file and the dotted field (``budget.steps``), never a pydantic traceback.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from distrepro.api.lr_schedule import ScheduleConfig
from distrepro.api.optimizer_config import OptimizerConfig
from distrepro.config.overrides import Override, apply_overrides
from distrepro.config.slurm_block import SlurmBlock
from distrepro.errors import ConfigError, PluginError, format_pydantic_error
from distrepro.names import name_problem
from distrepro.safe_yaml import read_yaml_mapping

if TYPE_CHECKING:
    from distrepro.api.method import MethodParams
    from distrepro.plugins.registry import MethodPlugin


#: most optimizer steps a run may take: every step trains for real, and at 1 ms a step (faster than any step
#: of this suite on a CPU) a billion steps take 11.6 days (:mod:`distrepro.orchestration.budget_check`)
MAX_STEPS = 10**9
#: largest seed index: seeds are indices the run derives its random streams from (:mod:`distrepro.seeding`),
#: not seeds themselves, so 0, 1, 2 ... suffice; the bound keeps them a 32-bit integer for every tool
MAX_SEED_INDEX = 2**31 - 1
#: the most seeds one ``--seeds`` may name (ranges included)
MAX_SEEDS_GIVEN = 10_000
#: smallest budget or evaluation period in epochs or emulated seconds: below a millionth, a value is a typo
#: (``1e-300``) whose only effect would be an evaluation after every step, or none at all
MIN_FRACTION = 1e-6
#: most torch threads a cell or rank may ask for: more threads than any machine this suite runs on has cores
#: (100,000 exhausted the machine's thread limit and ended in a segfault)
MAX_THREADS = 1024
#: most evaluations a schedule may ask for: each one scores the whole test set, untimed
MAX_EVALS = 100_000


class _Strict(BaseModel):
    """No unknown keys (a typo is an error, not a default) and no ``.inf``/``.nan`` in any number: an
    infinite budget or timeout never ends, and a NaN compares false with every bound."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_as_number(cls, v: Any, info: ValidationInfo) -> Any:
        """YAML's ``true`` is not the number 1 (``batch_size: true`` would train with batch 1): a boolean is
        accepted only by a field that may hold one."""
        if isinstance(v, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            if not _admits_bool(annotation):
                raise ValueError(f"expected a number or a name, not the boolean {str(v).lower()}")
        return v


def _admits_bool(annotation: Any) -> bool:
    """Whether a field's type holds a boolean (``bool``, ``bool | None``, ``Any``, a ``dict``/``list`` of them)."""
    if annotation is bool or annotation is Any:
        return True
    return any(_admits_bool(arg) for arg in get_args(annotation) if arg is not type(None))


class DatasetConfig(_Strict):
    name: str = "synthetic"
    root: Path | None = None  # for real datasets; relative paths are taken from the config's folder
    params: dict[str, Any] = Field(default_factory=dict)


class ModelConfig(_Strict):
    name: str = "small_cnn"
    params: dict[str, Any] = Field(default_factory=dict)


class Budget(_Strict):
    """How long to train: exactly one of the four units.

    ``steps`` are iterations of a lockstep method, or for asynchronous methods the total number
    of gradient computations divided by the world size. ``epochs`` and ``samples`` count samples
    processed by all workers together. ``emulated_seconds`` is virtual time.

    The one representation of a run's length: the engines stop on it (``TrainingSchedule``), methods read it
    (``ctx.train_state["budget"]``, frozen) and :meth:`total_steps` is its one conversion to steps.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: int | None = Field(default=None, gt=0, le=MAX_STEPS)  # the other units: checked once the job is built
    #: at least a millionth of an epoch or of an emulated second: a budget of 1e-300 is a typo, not a run
    epochs: float | None = Field(default=None, ge=MIN_FRACTION)
    samples: int | None = Field(default=None, gt=0)
    emulated_seconds: float | None = Field(default=None, ge=MIN_FRACTION)

    @model_validator(mode="after")
    def _exactly_one(self) -> Budget:
        set_ = [k for k in ("steps", "epochs", "samples", "emulated_seconds") if getattr(self, k) is not None]
        if len(set_) != 1:
            got = f"got {set_}" if set_ else "none is set: a unit set to null is cleared"
            raise ValueError(f"set exactly one of steps, epochs, samples, emulated_seconds ({got})")
        return self

    @property
    def unit(self) -> str:
        return next(k for k in ("steps", "epochs", "samples", "emulated_seconds") if getattr(self, k) is not None)

    @property
    def amount(self) -> float:
        return float(getattr(self, self.unit))

    def total_steps(self, dataset_size: int, global_batch: int) -> int | None:
        """Steps in the budget, for any unit but ``emulated_seconds`` (None: how many steps fit in a span of
        virtual time is known only once the run has taken them). A step processes ``global_batch`` samples
        (the allocation's batch sizes summed; for an asynchronous method, one gradient of every worker)."""
        if self.unit == "steps":
            return int(self.amount)
        if self.unit == "emulated_seconds":
            return None
        samples = self.amount * dataset_size if self.unit == "epochs" else self.amount
        return max(1, math.ceil(samples / max(global_batch, 1) - 1e-9))


class EvalSchedule(_Strict):
    """When and how to evaluate (untimed). At most one period; default: ``times`` evenly.

    The model scored is the average of the replicas (a method's ``evaluated_on``). ``replicas`` also scores
    every replica and logs the mean, std, min and max of their metrics; ``bn_recalibration_batches``
    re-estimates an averaged model's BatchNorm statistics on that many training batches first
    (:mod:`distrepro.engine.eval_modes` says why and how).
    """

    every_steps: int | None = Field(default=None, gt=0)
    every_epochs: float | None = Field(default=None, ge=MIN_FRACTION)
    every_emulated_seconds: float | None = Field(default=None, ge=MIN_FRACTION)
    #: used when no period is given: that many evals over the budget (each one scores the whole test set)
    times: int = Field(default=10, gt=0, le=MAX_EVALS)
    batch_size: int = Field(default=512, gt=0)
    replicas: bool = False
    bn_recalibration_batches: int = Field(default=0, ge=0)
    #: samples per recalibration batch; None: the largest per-worker batch of the run's allocation
    bn_recalibration_batch_size: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _at_most_one(self) -> EvalSchedule:
        set_ = [k for k in ("every_steps", "every_epochs", "every_emulated_seconds") if getattr(self, k)]
        if len(set_) > 1:
            raise ValueError(f"set at most one evaluation period (got {set_})")
        if self.bn_recalibration_batch_size is not None and self.bn_recalibration_batches == 0:
            raise ValueError("bn_recalibration_batch_size needs bn_recalibration_batches > 0")
        return self


class LossConfig(_Strict):
    """The training loss the harness computes in ``forward_backward`` (evaluation stays plain cross-entropy)."""

    label_smoothing: float = Field(default=0.0, ge=0, lt=1)


class Target(_Strict):
    """Quality target for time-to-target: the first evaluation where ``metric`` reaches ``value``."""

    metric: Literal["val_accuracy", "val_loss"] = "val_accuracy"
    value: float
    direction: Literal["max", "min"] | None = None  # default: max for accuracy, min for loss

    @model_validator(mode="after")
    def _direction(self) -> Target:
        natural: Literal["max", "min"] = "min" if self.metric == "val_loss" else "max"
        if self.direction is None:
            self.direction = natural
        elif self.direction != natural:
            raise ValueError(f"{self.metric} improves towards {natural}, not {self.direction}")
        return self


class DistConfig(_Strict):
    """Settings of the torch.distributed engine; the in-process engine reads only ``timeout_s`` (its watchdog:
    a cell whose workers make no progress that long fails, :mod:`distrepro.engine.inprocess.watchdog`)."""

    launcher: Literal["local", "torchrun"] = "local"  # local: one subprocess per rank, file rendezvous
    backend: Literal["auto", "gloo", "nccl"] = "auto"  # auto: nccl when every rank has its own GPU
    timeout_s: float = Field(default=120.0, gt=0)  # every training collective and store wait: a hung rank fails the run
    startup_timeout_s: float = Field(default=600.0, gt=0)  # rendezvous: ranks start at different times on busy hosts
    pin: bool = True  # pin CPU workers to core sets and GPU workers to GPUs where the host has them
    threads_per_rank: int | None = Field(default=None, gt=0, le=MAX_THREADS)  # default: cores / world size (at least 1)


class ThrottleConfig(_Strict):
    """Time dilation: make wall-clock time follow the virtual clock (distributed engine only)."""

    enabled: bool = False
    dilation: float | None = Field(default=None, gt=0)  # None: calibrate (slowest real/virtual ratio × margin)
    margin: float = Field(default=1.5, ge=1.0)
    calibration_steps: int = Field(default=3, ge=1)


class CheckpointConfig(_Strict):
    """Checkpoints of every rank at step boundaries, for ``distrepro run --resume`` (lockstep methods)."""

    every_steps: int | None = Field(default=None, gt=0)  # None: no checkpoints
    dir: Path = Path("checkpoints")  # one folder per MLflow run id below this
    keep: int = Field(default=2, ge=1)  # complete checkpoints kept per run


class RunConfig(_Strict):
    name: str = "run"
    paper: str | None = None  # MLflow experiment distrepro/<paper>; ad-hoc runs go to distrepro/adhoc
    scale: Literal["proxy", "mid", "gpu", "paper"] = "proxy"  # which scale of a paper's claims this run speaks to
    method: str
    method_params: dict[str, Any] = Field(default_factory=dict)
    profile: str = "homogeneous-4"
    profile_variant: str | None = None
    dataset: DatasetConfig = Field(default_factory=DatasetConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    #: per-worker batch size: one int for all, a list per rank, or "profile" (the device groups')
    batch_size: StrictInt | list[StrictInt] | Literal["profile"] = 32
    budget: Budget = Field(default_factory=lambda: Budget(steps=100))
    eval: EvalSchedule = Field(default_factory=EvalSchedule)
    #: the learning-rate schedule the harness applies (distrepro.api.lr_schedule); None: the method's LR, constant
    schedule: ScheduleConfig | None = None
    #: the optimizer of a method that builds its own through ``ctx.build_optimizer`` (distrepro.training.optimizers);
    #: the fields given here replace the method's own choice, the others stay the method's
    optimizer: OptimizerConfig | None = None
    loss: LossConfig = Field(default_factory=LossConfig)
    target: Target | None = None
    #: charge time and bytes as this named workload (hardware_profiles/workloads.yaml) while the
    #: math trains ``model``; None charges the trained model's own FLOPs and bytes
    emulated_workload: str | None = None
    #: strict: YAML's ``true`` is not seed 1
    seeds: list[Annotated[int, Field(strict=True, ge=0, le=MAX_SEED_INDEX)]] = Field(default_factory=lambda: [0])
    engine: Literal["inprocess", "dist"] = "inprocess"
    #: where the real training runs (distrepro.hardware.device): cpu (default), cuda (an error where there is none)
    #: or auto (cuda where torch sees one); emulated time never depends on it. The dist engine trains on the
    #: rank's GPU whenever its backend is NCCL, whatever this says (NCCL carries only CUDA tensors)
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    dist: DistConfig = Field(default_factory=DistConfig)
    throttle: ThrottleConfig = Field(default_factory=ThrottleConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    #: None: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else the CPUs this process may use (engine/torch_threads.py);
    #: in a local pool of cells, its cores over its jobs (orchestration/executors/selection.py)
    torch_threads: int | None = Field(default=None, gt=0, le=MAX_THREADS)
    #: how ``--executor slurm`` asks for each cell's job; not part of the run (excluded from what is logged)
    slurm: SlurmBlock | None = Field(default=None, exclude=True)
    timeline_spans_per_worker: int = Field(default=400, ge=0)
    #: the in-process engine computes the forward/backward of the workers one event released (a lockstep step's
    #: K workers) as one batched call (distrepro.engine.inprocess.batching): false, auto (default: when the model
    #: can be batched) or true (it must be). Gradients agree with the one-after-another path to float32 rounding,
    #: not bit for bit; auto became the default with a re-run of every registered run. Left out of the logged
    #: config while false, so that the configs of runs made before it existed keep their digest (and false
    #: repeats them)
    batched_replicas: StrictBool | Literal["auto"] = "auto"
    #: the method plugin and its validated params, once per config (:func:`resolve_method`), keyed by what
    #: they were validated from, so a config changed afterwards is validated again
    _resolved: tuple[tuple[str, str], MethodPlugin, MethodParams] | None = PrivateAttr(default=None)

    @model_serializer(mode="wrap")
    def _omit_defaults_added_later(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The config as logged and digested (``distrepro.config_sha256``), without a field added after runs were
        registered while it holds its default: those runs stay the current ones for their arm and seed."""
        data: dict[str, Any] = handler(self)
        if self.batched_replicas is False:
            data.pop("batched_replicas", None)
        return data

    @field_validator("batched_replicas", mode="before")
    @classmethod
    def _batched_mode(cls, v: Any) -> Any:
        if v is True or v is False or v == "auto":
            return v
        raise ValueError("expected true, false or auto")

    @field_validator("batch_size")
    @classmethod
    def _positive_batches(cls, v: int | list[int] | str) -> int | list[int] | str:
        values = [v] if isinstance(v, int) else (v if isinstance(v, list) else [])
        if any(b <= 0 for b in values):
            raise ValueError("batch sizes must be positive")
        return v

    @field_validator("name", "paper")
    @classmethod
    def _path_safe(cls, v: str | None) -> str | None:
        """The paper becomes ``reports/<paper>/`` and the experiment ``distrepro/<paper>``, the name a slurm job's
        and a cell's key: ``../../x`` would write outside ``reports/`` (:mod:`distrepro.names`)."""
        problem = None if v is None else name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        if not v or len(set(v)) != len(v):
            raise ValueError("seeds must be a non-empty list of distinct non-negative integers")
        return v


def parse_seeds(text: str, origin: str = "--seeds") -> list[int]:
    """``0,1,2`` or ``100-109`` (or a mix) as seed indices: decimal digits only, so that ``true``, ``0x10`` or
    ``1e3`` (which YAML would read as 1, 16 or a string) are errors rather than another seed, each within
    ``0..MAX_SEED_INDEX``. A range is inclusive, as a pre-registration writes it, and at most
    :data:`MAX_SEEDS_GIVEN` seeds are accepted in all (a typo such as ``100-1000000`` would otherwise queue a
    million cells)."""
    what = "comma-separated whole numbers or ranges, e.g. 0,1,2 or 100-109"
    seeds: list[int] = []
    if not text.strip():
        raise ConfigError(origin, None, f"no seed index given ({what})")
    for token in (t.strip() for t in text.split(",")):
        lo, dash, hi = token.partition("-")
        for part in (lo, hi) if dash else (lo,):
            if not part.isdecimal() or not part.isascii():
                raise ConfigError(origin, None, f"{token!r} is not a seed index ({what})")
            if int(part) > MAX_SEED_INDEX:
                raise ConfigError(origin, None, f"seed index {part} is above {MAX_SEED_INDEX} (indices: 0, 1, 2, ...)")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first:
            raise ConfigError(origin, None, f"range {token!r} ends before it starts ({what})")
        if len(seeds) + last - first + 1 > MAX_SEEDS_GIVEN:
            raise ConfigError(origin, None, f"more than {MAX_SEEDS_GIVEN} seeds given ({token!r})")
        for seed in range(first, last + 1):
            if seed in seeds:
                raise ConfigError(origin, None, f"seed index {seed} is given twice")
            seeds.append(seed)
    return seeds


def index_spans(indices: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2, 5"``: seed indices as :func:`parse_seeds` reads them back, and rank lists as
    plans print them."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping (``{}`` if empty) through the suite's one YAML reader (:mod:`distrepro.safe_yaml`):
    errors name the file and the line, duplicate keys, alias bombs and deep nesting included."""
    return read_yaml_mapping(path, "file", empty_ok=True)


def load_config(path: str | Path, overrides: Sequence[Override] = (), seeds: Sequence[int] | None = None) -> RunConfig:
    """Load and validate a run config; relative dataset roots resolve against the config's folder.

    ``overrides`` are applied in order, then ``seeds`` (``--seeds``, parsed by :func:`parse_seeds`) replace the
    config's seeds: both arrive typed, so a seed or a value is never turned into text to be read as YAML again."""
    path = Path(path)
    data = apply_overrides(read_yaml(path), overrides)
    if seeds is not None:  # validated with the rest of the config (distinct, within bounds)
        data["seeds"] = list(seeds)
    cfg = validate_config(data, source=path)
    if cfg.dataset.root is not None and not cfg.dataset.root.is_absolute():
        cfg.dataset.root = (path.parent / cfg.dataset.root).resolve()
    resolve_method(cfg, path)  # a bad method param fails here, before a dataset is built or a run created
    return cfg


def resolve_method(cfg: RunConfig, source: str | Path | None = None) -> tuple[MethodPlugin, MethodParams]:
    """The method plugin of ``cfg`` and its validated ``method_params``; errors name ``source`` and the field.

    Validated once per config: when it is loaded, or when the first job is built from a config made in code;
    every later job (each seed, each plan) reuses the result kept on the config.
    """
    from distrepro.plugins.registry import (
        get_method,  # imports torch and the plugins: only once a config names a method
    )

    key = (cfg.method, json.dumps(cfg.method_params, sort_keys=True, default=str))
    if cfg._resolved is not None and cfg._resolved[0] == key:
        return cfg._resolved[1], cfg._resolved[2]
    try:
        method = get_method(cfg.method)
    except PluginError as exc:  # name the config file and field, as every other input error does
        raise ConfigError(source, "method", str(exc)) from None
    try:
        params = method.cls.Params.model_validate(cfg.method_params)
    except ValidationError as exc:
        inner = format_pydantic_error(source, exc)
        field = f"method_params.{inner.field}" if inner.field else "method_params"
        raise ConfigError(source, field, inner.message) from None
    cfg._resolved = (key, method, params)
    return method, params


def validate_config(data: dict[str, Any], source: str | Path | None = None) -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise format_pydantic_error(source, exc) from None
