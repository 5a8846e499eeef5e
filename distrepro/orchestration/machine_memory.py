"""How much memory this machine can still give a campaign, and what a cell is estimated to need.

Both bound what is started before it starts: :func:`check_memory` refuses a campaign whose replicas cannot fit
(four ResNet-152 replicas under a 4 GB limit died with a raw allocator error, mid-run), and the local pool starts
no more workers than the memory holds (:func:`worker_cap`).

*Available* is the least of what the kernel says is available (``MemAvailable`` in ``/proc/meminfo``; psutil
elsewhere), what this process's cgroup still allows (v2 ``memory.max`` less ``memory.current``, or v1's limit less
usage) and, under ``ulimit -v``, the address space left (``RLIMIT_AS`` less this process's ``VmSize``).

The *estimate* of a cell is rough and documented, a floor more than a forecast, so that only a run that cannot fit
is refused: per replica, the parameters, their gradients and two optimizer buffers (Adam's moments; plain SGD keeps
at most one), so 4 x the parameter bytes; times the replicas the engines keep in one machine (one per rank: the
in-process engine holds all K in this process, the multiprocess engine one per process, on this machine too); plus
the activations of one batch, bounded from below by the batch's input itself (``batch x sample bytes``, fp32) times
:data:`ACTIVATION_FACTOR`, held while the backward runs.
"""

from __future__ import annotations

import resource
from pathlib import Path
from typing import Any

from distrepro.errors import ConfigError

#: parameter-sized tensors per replica: weights, gradients and two optimizer buffers
STATE_COPIES = 4
#: activations of a batch, as a multiple of its input's bytes (a floor: a deep network keeps far more)
ACTIVATION_FACTOR = 4
#: what a local pool's worker holds before its cell starts (an interpreter with torch, numpy and mlflow imported)
WORKER_BASE_BYTES = 600 * 2**20
GIB = 2**30


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:
        return None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_left() -> int | None:
    """What this process's cgroup still allows (v2, then v1), or None without a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        rel = rel.lstrip("/")
        if controllers == "":  # v2: the unified hierarchy
            base = Path("/sys/fs/cgroup") / rel
            limit, used = _read_int(base / "memory.max"), _read_int(base / "memory.current")
        elif "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / rel
            limit = _read_int(base / "memory.limit_in_bytes")
            used = _read_int(base / "memory.usage_in_bytes")
        else:
            continue
        if limit is not None and limit < 2**60:  # v1 writes "no limit" as a huge number
            return max(0, limit - (used or 0))
    return None


def _address_space_left() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmSize:"):
                return max(0, soft - int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return soft


def available_bytes() -> int | None:
    """The memory this machine can still give (the least of the three limits above), or None where none is known."""
    known = [v for v in (_meminfo_available(), _cgroup_left(), _address_space_left()) if v is not None]
    return min(known) if known else None


def cell_bytes(param_bytes: float, replicas: int, batch: int, sample_bytes: float) -> tuple[float, str]:
    """The estimate of one cell (see the module's text) and how it was made, in words."""
    state = STATE_COPIES * param_bytes * replicas
    activations = ACTIVATION_FACTOR * batch * sample_bytes * replicas
    how = (
        f"{replicas} replica(s) x {STATE_COPIES} x {param_bytes / 2**20:.0f} MiB of parameters (weights, gradients, "
        f"optimizer state) + activations of a batch of {batch} ({activations / 2**20:.0f} MiB at least)"
    )
    return state + activations, how


def job_bytes(job: Any) -> tuple[float, str]:
    """:func:`cell_bytes` of a built :class:`~distrepro.job.resolve.Job` (the proxy model that trains for real)."""
    shape = getattr(job.bundle, "input_shape", None) or ()
    elements = 1
    for n in shape:
        elements *= int(n)
    return cell_bytes(float(job.proxy_param_bytes), len(job.batch_sizes), max(job.batch_sizes), 4.0 * elements)


def check_memory(job: Any, source: str | Path | None, available: int | None = None) -> None:
    """Refuse ``job`` (a :class:`ConfigError` naming ``source`` and the model) when even the estimate of what its
    replicas hold exceeds the memory this machine can still give; nothing is refused where none is known."""
    free = available_bytes() if available is None else available
    if free is None:
        return
    need, how = job_bytes(job)
    if need > free:
        model = job.config.model.name
        raise ConfigError(
            source,
            "model.name",
            f"{model}: this run needs about {need / GIB:.2f} GiB ({how}) but this machine has "
            f"{free / GIB:.2f} GiB available; use a smaller model, fewer ranks or a smaller batch",
        )


def worker_cap(per_worker: float = WORKER_BASE_BYTES, available: int | None = None) -> int | None:
    """The most local pool workers the memory holds (each at least ``per_worker``), or None where none is known."""
    free = available_bytes() if available is None else available
    if free is None:
        return None
    return max(1, int(free // per_worker))


def describe_available(available: int | None = None) -> str:
    free = available_bytes() if available is None else available
    return "an unknown amount of memory" if free is None else f"{free / GIB:.1f} GiB of memory available"


__all__ = ["available_bytes", "cell_bytes", "check_memory", "describe_available", "job_bytes", "worker_cap"]
