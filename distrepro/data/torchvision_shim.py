"""Import torchvision safely on CPU-only torch.

The torchvision 0.28.0 wheel that pins torch 2.13.0 is a CUDA build; on the CPU torch wheel its
C extension does not load and ``import torchvision`` dies in ``_meta_registrations`` with
"operator torchvision::nms does not exist" (observed on the project's CPU machine: torch 2.13.0+cpu
with torchvision 0.28.0+cu130, whose ``_C.so`` links against ``libtorch_cuda.so``).
Defining the two operator schemas first lets the pure-Python parts (models, datasets, transforms)
import; the custom ops themselves stay unavailable, and nothing in distrepro uses them.
"""

from __future__ import annotations

import types

import torch

_LIB: torch.library.Library | None = None


def _install_shim() -> None:
    global _LIB
    try:
        torch.ops.torchvision.nms  # noqa: B018 - real extension loaded: nothing to do
        return
    except (AttributeError, RuntimeError):
        pass
    if _LIB is None:
        _LIB = torch.library.Library("torchvision", "DEF")
        _LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


def load() -> types.ModuleType:
    """Return the ``torchvision`` module, installing the shim first when needed."""
    _install_shim()
    import torchvision

    return torchvision
