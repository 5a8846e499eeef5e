"""How many torch threads a run uses when its config does not say (``torch_threads``).

torch's own default is the machine's core count, which is wrong wherever the process may use fewer:
a container or ``taskset`` limits the CPU affinity, a SLURM job gets ``--cpus-per-task``, and a user
or launcher (torchrun sets 1 per rank) sets ``OMP_NUM_THREADS``. A config that pins a number (C-ADP's
used to pin 2) is wrong on every machine but one. So, in order: ``OMP_NUM_THREADS`` (the user's word,
per process), ``SLURM_CPUS_PER_TASK`` (the job's share), else the CPUs this process may run on; the last
two are shared by the ranks on the host. The choice is logged with the run (tag
``distrepro.torch_threads``), since it changes wall time (never the emulated time).
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def _positive(value: str | None) -> int | None:
    try:
        n = int((value or "").strip())
    except ValueError:
        return None
    return n if n > 0 else None


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask; the core count where there is none)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def omp_threads(environ: Mapping[str, str] | None = None) -> int | None:
    """``OMP_NUM_THREADS`` as a positive number, if the user set one."""
    return _positive((os.environ if environ is None else environ).get("OMP_NUM_THREADS"))


def default_threads(ranks_here: int = 1, environ: Mapping[str, str] | None = None) -> tuple[int, str]:
    """``(threads, where from)`` for one process of ``ranks_here`` sharing this host."""
    env = os.environ if environ is None else environ
    omp = omp_threads(env)
    if omp is not None:
        return omp, "OMP_NUM_THREADS"
    slurm = _positive(env.get("SLURM_CPUS_PER_TASK"))
    total, source = (slurm, "SLURM_CPUS_PER_TASK") if slurm is not None else (available_cpus(), "CPU affinity")
    return max(1, total // max(1, ranks_here)), source


def resolve_threads(configured: int | None, ranks_here: int = 1) -> tuple[int, str]:
    """The config's ``torch_threads`` if set, else :func:`default_threads`."""
    if configured:
        return configured, "config torch_threads"
    return default_threads(ranks_here)
