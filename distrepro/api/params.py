"""A method's hyperparameters: the :class:`MethodParams` base, the typed ranges most methods share, the declared
peak learning rate (:data:`PeakLR`) and the optimizer those params describe (:func:`method_optimizer`).

Apart from :mod:`distrepro.api.method` because the config layer and the training helpers read params (their peak
LR, their optimizer) without needing the worker context or the :class:`~distrepro.api.method.Method` class.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo

from distrepro.api.optimizer_config import OptimizerConfig


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


class _PeakLRMarker:
    """The metadata that makes a params field the run's peak LR (:data:`PeakLR`); compared by identity."""

    def __repr__(self) -> str:
        return "PEAK_LR"


#: the marker itself, for a field typed otherwise: ``lr: Annotated[float, Field(gt=0), api.PEAK_LR]``
PEAK_LR: Final = _PeakLRMarker()
#: the peak learning rate, declared: ``lr: api.PeakLR = 0.05`` (any field name: ``inner_lr: api.PeakLR``). The
#: harness's ``schedule:`` scales from it, ``ctx.lr`` follows it and the ``lr`` metric logs it; a params model
#: without one has no LR the harness knows of (a ``schedule:`` is then refused). At most one field per model.
#: A field typed :class:`OptimizerConfig` (any name) is declared by its type: its ``lr``, where given, replaces it.
PeakLR = Annotated[float, Field(gt=0), PEAK_LR]


def _fields_where(params: type[MethodParams], test: Callable[[FieldInfo], bool]) -> list[str]:
    return [name for name, info in params.model_fields.items() if test(info)]


def peak_lr_field(params: type[MethodParams]) -> str | None:
    """The name of ``params``' field declared :data:`PeakLR`, or None; two are a TypeError."""
    names = _fields_where(params, lambda info: any(m is PEAK_LR for m in info.metadata))
    if len(names) > 1:
        raise TypeError(f"{params.__qualname__} declares {len(names)} peak LRs ({', '.join(names)}); declare one")
    return names[0] if names else None


def optimizer_field(params: type[MethodParams]) -> str | None:
    """The name of ``params``' field typed :class:`OptimizerConfig` (or ``OptimizerConfig | None``), or None."""

    def is_optimizer(info: FieldInfo) -> bool:
        return info.annotation is OptimizerConfig or OptimizerConfig in typing.get_args(info.annotation)

    names = _fields_where(params, is_optimizer)
    if len(names) > 1:
        raise TypeError(f"{params.__qualname__} has {len(names)} OptimizerConfig fields ({', '.join(names)}); keep one")
    return names[0] if names else None


def declared_peak_lr(params: MethodParams) -> float | None:
    """The peak LR ``params`` declare: the :data:`PeakLR` field, replaced by the ``lr`` of the
    :class:`OptimizerConfig` field where that is given explicitly; None when neither names one."""
    field = peak_lr_field(type(params))
    lr: float | None = None if field is None else float(getattr(params, field))
    opt_field = optimizer_field(type(params))
    opt = None if opt_field is None else getattr(params, opt_field)
    if isinstance(opt, OptimizerConfig) and "lr" in opt.model_fields_set:
        lr = float(opt.lr)
    return lr


def overlay(base: OptimizerConfig, override: OptimizerConfig | None) -> OptimizerConfig:
    """``base`` with the fields ``override`` sets explicitly (a config's ``{name: adamw}`` keeps the method's lr)."""
    if override is None:
        return base
    return base.model_copy(update={k: getattr(override, k) for k in override.model_fields_set})


def method_optimizer(params: MethodParams) -> OptimizerConfig:
    """The optimizer a method's params describe: SGD at the declared peak LR (``api.PeakLR``) with the params'
    ``momentum``/``weight_decay``/``nesterov`` fields where it has them, and its ``api.OptimizerConfig`` field
    (if it has one) overlaid."""
    field = peak_lr_field(type(params))
    opt_field = optimizer_field(type(params))
    base = OptimizerConfig(
        name="sgd",
        lr=float(getattr(params, field)) if field is not None else OptimizerConfig().lr,
        momentum=float(getattr(params, "momentum", 0.0)),
        weight_decay=float(getattr(params, "weight_decay", 0.0)),
        nesterov=bool(getattr(params, "nesterov", False)),
    )
    return overlay(base, None if opt_field is None else getattr(params, opt_field))
