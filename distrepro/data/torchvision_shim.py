"""Import torchvision safely on CPU-only torch.

The torchvision 0.28.0 wheel that pins torch 2.13.0 is a CUDA build; on the CPU torch wheel its
C extension does not load and ``import torchvision`` dies in ``_meta_registrations`` with
"operator torchvision::nms does not exist" (observed on the project's CPU machine: torch 2.13.0+cpu
with torchvision 0.28.0+cu130, whose ``_C.so`` links against ``libtorch_cuda.so``).
Defining the two operator schemas first lets the pure-Python parts (models, datasets, transforms)
import; the custom ops themselves stay unavailable, and nothing in distrepro uses them.

Where the extension does load (a CUDA torch with its matching torchvision, e.g. on a GPU machine), it is loaded
first and no schema is defined: defining them there made the extension's own registration abort the process
("Tried to register an operator (torchvision::nms ...) multiple times", seen on an H100 with torch 2.11+cu130).
"""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import torch

_LIB: torch.library.Library | None = None


def _install_shim() -> None:
    global _LIB
    try:
        torch.ops.torchvision.nms  # noqa: B018 - real extension loaded: nothing to do
        return
    except (AttributeError, RuntimeError):
        pass
    if _real_extension_loads():
        return
    if _LIB is None:
        _LIB = torch.library.Library("torchvision", "DEF")
        _LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


def _real_extension_loads() -> bool:
    """Load torchvision's compiled operators if this torch can: True when they are now registered."""
    spec = importlib.util.find_spec("torchvision")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for library in sorted(Path(folder).glob("_C.*")):
            try:
                torch.ops.load_library(str(library))
            except (OSError, RuntimeError):  # e.g. a CUDA build's _C.so on CPU torch: libtorch_cuda.so is absent
                return False
            return True
    return False


def load() -> types.ModuleType:
    """Return the ``torchvision`` module, installing the shim first when needed."""
    _install_shim()
    import torchvision

    return torchvision
