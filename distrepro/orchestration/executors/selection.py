"""Which executor a command gets: the ``--executor`` flags, each cell's cores, and this machine's."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distrepro.errors import ConfigError

if TYPE_CHECKING:
    from distrepro.orchestration.executors.interface import Executor

EXECUTORS = ("local", "ray", "slurm")


@dataclass
class ExecutorSpec:
    """The executor as the command line names it; :func:`make_executor` turns it into one."""

    kind: str = "local"
    jobs: int | None = None  # local: cells at once (default: cores // a cell's threads)
    ray_address: str | None = None
    slurm: dict[str, Any] = field(default_factory=dict)  # --slurm-* flags (None: not given)
    slurm_cluster: str | None = None  # None: SLURM as submitit detects it; "local": processes here


def cores() -> int:
    """The cores this process may use (its affinity, which SLURM and taskset narrow), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


def cell_threads(cfg: Any) -> int:
    """Cores one cell of ``cfg`` keeps busy when cells share this machine: its config's ``torch_threads``, else
    ``OMP_NUM_THREADS`` (the user's word), else one; ranks × threads per rank for the dist engine.

    A cell that sets no threads counts as one so that a session of many cells fills the cores with cells
    (each gets cores // jobs threads, :func:`make_executor`) instead of running one multi-threaded cell at a
    time: the small models of the proxy scales gain little from a second thread, and lose the most on a shared
    machine (A²CiD²'s 150 proxy runs on 2 idle cores: 417 s wall and 739 s CPU one 2-thread cell at a time,
    262 s and 449 s as two one-thread cells; BENCHMARKS.md, "Run times of the reproduce sessions"). One cell
    alone still gets every core (the in-process path, :func:`~distrepro.engine.torch_threads.resolve_threads`)."""
    if cfg.engine == "dist":
        per_rank = cfg.dist.threads_per_rank or 1
        return max(1, per_rank * _world_size(cfg))
    if cfg.torch_threads:
        return int(cfg.torch_threads)
    from distrepro.engine.torch_threads import omp_threads

    return omp_threads() or 1


def _world_size(cfg: Any) -> int:
    from distrepro.hardware.profiles import load_profile

    return int(load_profile(cfg.profile, cfg.profile_variant).world_size)


def default_jobs(cfgs: Sequence[Any]) -> int:
    """Cells at once on this machine: the cores over the hungriest cell's threads, at least 1."""
    widest = max((cell_threads(c) for c in cfgs), default=1)
    return max(1, cores() // widest)


#: the default of ``--jobs`` when set (e.g. 1 in CI, or in a test suite whose tests patch this process)
JOBS_ENV = "DISTREPRO_JOBS"


def env_jobs() -> int | None:
    """``DISTREPRO_JOBS`` as a number of jobs, if set; a value that is not a positive integer is an error."""
    text = os.environ.get(JOBS_ENV, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(JOBS_ENV, None, f"needs a positive number of jobs, got {text!r}")
    return int(text)


def _capped(jobs: int, flag: str | None) -> int:
    """``jobs`` held to this machine's cores and to the workers its memory holds
    (:func:`~distrepro.orchestration.machine_memory.worker_cap`): ``--jobs 1000`` with 1,000 seeds started 1,000
    workers importing torch. A cap below what ``flag`` asked for is said in one line."""
    from distrepro.orchestration.machine_memory import describe_available, worker_cap

    by_memory = worker_cap()
    cap = min(cores(), by_memory if by_memory is not None else jobs)
    if jobs <= cap:
        return jobs
    if flag is not None:
        print(
            f"distrepro: {flag} {jobs} capped to {cap} worker(s): this machine has {cores()} core(s) and "
            f"{describe_available()} (a worker holds about 0.6 GiB before its cell starts)",
            file=sys.stderr,
        )
    return cap


def make_executor(spec: ExecutorSpec, cfgs: Sequence[Any]) -> Executor | None:
    """The executor for ``spec`` and the campaigns' configs; ``None`` for the classic in-process path
    (``local`` with one job), which needs no executor at all."""
    if spec.kind == "local":
        from distrepro.orchestration.executors.local_pool import LocalExecutor

        if spec.jobs is not None and spec.jobs < 1:
            raise ConfigError("--jobs", None, f"needs at least 1 job, got {spec.jobs}")
        jobs = spec.jobs or env_jobs() or default_jobs(cfgs)
        cells = sum(len(getattr(c, "seeds", [0])) for c in cfgs) or 1
        jobs = min(jobs, cells)  # a worker process per cell at most: --jobs 1000 for 2 cells starts 2
        jobs = _capped(jobs, "--jobs" if spec.jobs is not None else JOBS_ENV if env_jobs() else None)
        if jobs == 1:
            return None
        from distrepro.engine.torch_threads import omp_threads

        return LocalExecutor(jobs, threads=omp_threads() or max(1, cores() // jobs))
    if spec.kind == "ray":
        from distrepro.orchestration.executors.ray_executor import RayExecutor

        return RayExecutor(spec.ray_address)
    if spec.kind == "slurm":
        from distrepro.config.slurm_block import SlurmBlock
        from distrepro.orchestration.executors.slurm_executor import SlurmExecutor

        blocks = [getattr(c, "slurm", None) or SlurmBlock() for c in cfgs]
        base = blocks[0].merged(spec.slurm) if blocks else SlurmBlock().merged(spec.slurm)
        per_arm = {c.name: b.merged(spec.slurm) for c, b in zip(cfgs, blocks, strict=True)}
        return SlurmExecutor(base, spec.slurm_cluster, per_arm)
    raise ConfigError("--executor", None, f"unknown executor '{spec.kind}'; use one of {', '.join(EXECUTORS)}")
