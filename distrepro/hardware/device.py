"""Where a run's tensors live (the run config's ``device``), and how CUDA is made as deterministic as torch can.

Why a setting at all: the emulated time never depends on the device (it comes from the hardware profile), so a
GPU only makes the *real* training faster; that is what lets a recipe sized for one 80 GB GPU (``--scale gpu``,
``*.gpu.yaml``) train ResNet-18 on CIFAR-10 in an hour where a CPU needs days. ``cpu`` is the default, and with it
nothing changes: every existing run stays bitwise what it was. ``cuda`` asks for the current CUDA device and is a
one-line :class:`~distrepro.errors.ConfigError` naming the config file and the field where there is none (checked
before anything is logged, by ``distrepro reproduce`` and when a campaign's jobs are built, and again where the
run trains). ``auto`` takes CUDA
where torch sees it and the CPU elsewhere (the same config on a laptop and on a GPU box; the run's logged config
says ``auto``, its tag ``distrepro.device`` what it got).

Determinism on CUDA (:func:`deterministic_cuda`, entered for the whole run): ``torch.use_deterministic_algorithms
(True, warn_only=True)`` picks the deterministic kernels where torch has one (cuDNN convolutions with
``cudnn.deterministic``, no ``cudnn.benchmark`` autotuning), and ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (set by
:func:`resolve_device` when the user has not set it, before the run's first cuBLAS call; a process that used
cuBLAS before keeps the workspace it started with) makes cuBLAS reductions repeatable, as
torch's reproducibility notes require (docs.pytorch.org/docs/stable/notes/randomness.html). ``warn_only``: an
operation with no deterministic CUDA kernel warns instead of failing the run; ResNet's ``AdaptiveAvgPool2d``
backward is on torch's list, although for the 1x1 output the CIFAR ResNet uses every input gets exactly one
contribution, so its atomic adds cannot reorder. What stays true: a CUDA run repeats itself on the same GPU type,
driver and torch; it does not reproduce the CPU run's bits (other kernels, and cuDNN's TF32 convolutions, on by
default in torch on Ampere and Hopper), and two GPU types may differ. Seeds do not move: every random stream of
the harness and the methods is drawn on the CPU from derived generators and copied to the device.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from distrepro.errors import ConfigError
from distrepro.seeding import derive_seed

#: cuBLAS workspace setting that makes its reductions deterministic (torch's reproducibility notes)
CUBLAS_WORKSPACE = ":4096:8"


def cuda_absent_reason() -> str | None:
    """Why torch cannot use CUDA here, in words (None when it can)."""
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is built without CUDA"
    return "torch sees no CUDA device (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them)"


def resolve_device(setting: str, source: str | Path | None = None, field: str = "device") -> torch.device:
    """The torch device of a run config's ``device`` (``cpu``, ``cuda`` or ``auto``); ``cuda`` without CUDA is a
    :class:`ConfigError` naming ``source`` and ``field``."""
    if setting == "cpu":
        return torch.device("cpu")
    if setting not in ("cuda", "auto"):
        raise ConfigError(source, field, f"unknown device {setting!r}; use cpu, cuda or auto")
    absent = cuda_absent_reason()
    if absent is None:
        # cuBLAS reads it once, when its first handle is made: set now, before the model or a batch touches the GPU
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
        return torch.device("cuda", torch.cuda.current_device())
    if setting == "auto":
        return torch.device("cpu")
    raise ConfigError(source, field, f"device: cuda asks for a GPU, but {absent}; use device: cpu or auto")


def describe(device: torch.device) -> str:
    """``cpu``, or ``cuda:0 (NVIDIA H100 80GB HBM3)``: what a run's ``distrepro.device`` tag says."""
    if device.type != "cuda":
        return str(device)
    return f"{device} ({torch.cuda.get_device_name(device)})"


@contextmanager
def deterministic_cuda(device: torch.device) -> Iterator[None]:
    """Deterministic CUDA kernels for the duration (module docstring); nothing at all on the CPU.

    The previous settings are restored after, so a test or a notebook that runs a CUDA job keeps its own."""
    if device.type != "cuda":
        yield
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2], before[3]


@contextmanager
def seeded_global_rng(device: torch.device, *parts: object) -> Iterator[None]:
    """torch's process-wide random generator seeded from the run (``parts``) for the duration, then restored.

    Why: code the harness does not own draws from the global generator (a dataset's random crop and flip, as
    torchvision's transforms do; dropout). Unseeded, those draws depend on whatever ran before in the process, so a
    cell's result depended on the cells a pool worker had run before it, and two runs of one job in one process
    differed (seen on an H100 and on its host's CPU: A²CiD² and QSR GPU recipes with augmentation). Seeded here,
    they are derived like every other stream; runs that never draw from it are unchanged bit for bit."""
    cuda = device.type == "cuda"
    devices = [device.index if device.index is not None else torch.cuda.current_device()] if cuda else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(derive_seed(*parts, "global-rng"))
        yield
