"""The plugin surface: everything a method or dataset plugin may use, as ``from distrepro import api``.

Plugins (``methods/<name>/*.py``, ``datasets/*.py``, in the repository or a user's ``--root``) import nothing else
of ``distrepro``; ``nox -s lint`` checks it (``tools/check_imports.py``), and the package ships ``py.typed`` so a
plugin outside the repository is type-checked against these names. What is here:

* the method contract (:mod:`distrepro.api.method`): :class:`Method`, :class:`MethodParams` and the typed ranges
  (:data:`PeakLR` declares the peak learning rate), :class:`WorkerContext`, :class:`LRSchedule`, :class:`Batch`,
  :class:`PlanSetting`; data allocation (:mod:`distrepro.api.allocation`), communication
  (:mod:`distrepro.api.collectives`, :mod:`distrepro.api.gossip`);
* helpers for writing a method: SGD and tensor utilities (:mod:`distrepro.api.tensors`), DDP-style overlapped
  all-reduce (:mod:`distrepro.api.overlap`), the optimizer a config describes (:class:`OptimizerConfig`,
  :func:`method_optimizer`, :func:`set_lr`);
* for dataset plugins: :class:`DatasetBundle`, :class:`DatasetShape`, ImageNet normalisation and transforms,
  :func:`load_torchvision` (torchvision through the harness's CPU shim);
* errors a plugin raises (:class:`ConfigError`, :class:`CommError`) and seeded generators (:func:`generator`);
* for a method's report hooks and products (``report.py``, ``products.py``): :func:`build_plan`,
  :func:`run_campaign`, :class:`RunConfig` and the report's :mod:`figures` helpers, imported on first use (they
  pull in MLflow and matplotlib, which a training process does not need).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from distrepro.api.method import (
    PEAK_LR,
    Allocation,
    Batch,
    ClockView,
    ClusterLayout,
    ClusterView,
    Comm,
    DeviceView,
    GossipAgent,
    GossipEndpoint,
    Group,
    LearningRate,
    LRSchedule,
    Method,
    MethodParams,
    Momentum,
    NonNegativeFloat,
    OptimizerConfig,
    PartitionKind,
    PeakLR,
    PlanSetting,
    PositiveFloat,
    PositiveInt,
    ReduceOp,
    WeightDecay,
    Work,
    WorkerContext,
)
from distrepro.api.overlap import all_reduce_overlapped
from distrepro.api.tensors import broadcast_buffers, float_buffers, grads_of, sgd, state_tensors
from distrepro.data.loading import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    DatasetBundle,
    DatasetShape,
    imagenet_transform,
    load_image,
)
from distrepro.data.torchvision_shim import load as load_torchvision
from distrepro.errors import CommError, ConfigError
from distrepro.seeding import generator

if TYPE_CHECKING:
    from distrepro.config.run_config import RunConfig
    from distrepro.orchestration.campaign import run_campaign
    from distrepro.orchestration.plan import build_plan
    from distrepro.report import figures
    from distrepro.training.ingredients import method_optimizer
    from distrepro.training.optimizers import set_lr

#: names imported on first use: module -> attribute (None: the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "RunConfig": ("distrepro.config.run_config", "RunConfig"),
    "run_campaign": ("distrepro.orchestration.campaign", "run_campaign"),
    "build_plan": ("distrepro.orchestration.plan", "build_plan"),
    "figures": ("distrepro.report.figures", None),
    "method_optimizer": ("distrepro.training.ingredients", "method_optimizer"),
    "set_lr": ("distrepro.training.optimizers", "set_lr"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'distrepro.api' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    loaded = importlib.import_module(module)
    value = loaded if attribute is None else getattr(loaded, attribute)
    globals()[name] = value
    return value


__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "PEAK_LR",
    "Allocation",
    "Batch",
    "ClockView",
    "ClusterLayout",
    "ClusterView",
    "Comm",
    "CommError",
    "ConfigError",
    "DatasetBundle",
    "DatasetShape",
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
    "RunConfig",
    "WeightDecay",
    "Work",
    "WorkerContext",
    "all_reduce_overlapped",
    "broadcast_buffers",
    "build_plan",
    "figures",
    "float_buffers",
    "generator",
    "grads_of",
    "imagenet_transform",
    "load_image",
    "load_torchvision",
    "method_optimizer",
    "run_campaign",
    "set_lr",
    "sgd",
    "state_tensors",
]
