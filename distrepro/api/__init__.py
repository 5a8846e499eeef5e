"""The plugin surface: everything a method or dataset plugin may use, as ``from distrepro import api``.

Plugins (``methods/<name>/*.py``, ``datasets/*.py``, in the repository or a user's ``--root``) import nothing else
of ``distrepro``; ``nox -s lint`` checks it (``tools/check_imports.py``), and the package ships ``py.typed`` so a
plugin outside the repository is type-checked against these names. What is here:

* the method contract (:mod:`distrepro.api.method`): :class:`Method`, :class:`MethodParams` and the typed ranges
  (:data:`PeakLR` declares the peak learning rate), :class:`WorkerContext`, :class:`LRSchedule`, :class:`Batch`,
  :class:`PlanSetting` and what ``plan`` returns (:class:`MethodPlan`, :class:`Transfer`, :class:`ParamShape`,
  :mod:`distrepro.api.plan`); data allocation (:mod:`distrepro.api.allocation`), communication
  (:mod:`distrepro.api.collectives`, :mod:`distrepro.api.gossip`);
* helpers for writing a method: SGD and tensor utilities (:mod:`distrepro.api.tensors`), DDP-style overlapped
  all-reduce (:mod:`distrepro.api.overlap`), the optimizer a config describes (:class:`OptimizerConfig`,
  :func:`method_optimizer`, :func:`set_lr`);
* for dataset plugins: :class:`DatasetBundle`, :class:`DatasetShape`, ImageNet normalisation and transforms,
  :func:`load_torchvision` (torchvision through the harness's CPU shim);
* errors a plugin raises (:class:`ConfigError`, :class:`CommError`) and seeded generators (:func:`generator`);
* for a method's report hooks and products (``report.py``: ``section(ctx)``, ``products.py``: ``build(ctx)`` and
  ``describe(ctx)``): :class:`ReportContext`, which the harness passes in (its folders, the claims as
  :class:`ClaimView`, a config's plan, a short training run as :class:`EvalPoint` records, the code's version to
  key a cache, saving a figure), so a hook never imports the runner; :class:`Product`, a product's caption.

Nothing here imports the harness: this package is the contract and can be no larger than it.
"""

from __future__ import annotations

from distrepro.api.method import (
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
from distrepro.api.params import PEAK_LR, method_optimizer
from distrepro.api.plan import MethodPlan, ParamShape, Transfer
from distrepro.api.report_context import ClaimView, EvalPoint, Product, ReportContext
from distrepro.api.tensors import (
    broadcast_buffers,
    flat_parameters,
    float_buffers,
    grads_of,
    set_lr,
    sgd,
    state_tensors,
)
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

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "PEAK_LR",
    "Allocation",
    "Batch",
    "ClaimView",
    "ClockView",
    "ClusterLayout",
    "ClusterView",
    "Comm",
    "CommError",
    "ConfigError",
    "DatasetBundle",
    "DatasetShape",
    "DeviceView",
    "EvalPoint",
    "GossipAgent",
    "GossipEndpoint",
    "Group",
    "LRSchedule",
    "LearningRate",
    "Method",
    "MethodParams",
    "MethodPlan",
    "Momentum",
    "NonNegativeFloat",
    "OptimizerConfig",
    "ParamShape",
    "PartitionKind",
    "PeakLR",
    "PlanSetting",
    "PositiveFloat",
    "PositiveInt",
    "Product",
    "ReduceOp",
    "ReportContext",
    "Transfer",
    "WeightDecay",
    "Work",
    "WorkerContext",
    "all_reduce_overlapped",
    "broadcast_buffers",
    "flat_parameters",
    "float_buffers",
    "generator",
    "grads_of",
    "imagenet_transform",
    "load_image",
    "load_torchvision",
    "method_optimizer",
    "set_lr",
    "sgd",
    "state_tensors",
]
