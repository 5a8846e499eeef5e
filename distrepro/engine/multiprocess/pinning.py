"""Pin each rank to the device its profile describes, where the host has it.

GPU workers get a GPU each (``torch.cuda.set_device``); CPU workers get a core set of the
profile's size (``os.sched_setaffinity``) and that many torch threads. When the host has too
few cores for the profile (e.g. a laptop standing in for 16-core servers), pinning is skipped
and the run says so: the profile's speeds are then enforced by time dilation (throttling) or
only on the virtual clock.
"""

from __future__ import annotations

import os

import torch

from distrepro.engine.torch_threads import default_threads
from distrepro.job.resolve import Job


def cpu_core_sets(job: Job, host_cores: list[int], ranks: list[int] | None = None) -> dict[int, list[int]] | None:
    """Disjoint core sets for the CPU ranks among ``ranks`` (those on this host; default all), in
    rank order, or None if the host is too small."""
    sets: dict[int, list[int]] = {}
    cursor = 0
    for r in ranks if ranks is not None else range(job.world_size):
        dev = job.profile.device(r)
        if dev.kind != "cpu":
            continue
        need = dev.cores or 1
        if cursor + need > len(host_cores):
            return None
        sets[r] = host_cores[cursor : cursor + need]
        cursor += need
    return sets


def local_ranks(rank: int, local_rank: int, local_world: int) -> list[int]:
    """The ranks on this host: torchrun numbers the ranks of one node contiguously."""
    first = rank - local_rank
    return list(range(first, first + local_world))


def pin_worker(job: Job, rank: int, local_rank: int, world: int, local_world: int | None = None) -> str:
    """Pin this process; returns a one-line note of what was done (logged as a tag).

    Only the ranks on this host (``local_world`` of them, from torchrun's LOCAL_WORLD_SIZE) share
    its cores; on one machine that is every rank.
    """
    local_world = local_world or world
    if not job.config.dist.pin:
        threads = job.config.dist.threads_per_rank or default_threads(local_world)[0]
        torch.set_num_threads(threads)
        return f"pinning off; {threads} threads"
    dev = job.profile.device(rank)
    if dev.kind == "gpu" and torch.cuda.is_available():
        gpu = local_rank % torch.cuda.device_count()
        torch.cuda.set_device(gpu)
        return f"rank {rank} -> cuda:{gpu}"
    host = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    here = local_ranks(rank, local_rank, local_world)
    sets = cpu_core_sets(job, host, here) if dev.kind == "cpu" else None
    if sets is not None and rank in sets:
        os.sched_setaffinity(0, sets[rank])
        torch.set_num_threads(len(sets[rank]))
        return f"rank {rank} -> cores {sets[rank]}"
    threads = job.config.dist.threads_per_rank or default_threads(local_world)[0]
    torch.set_num_threads(threads)
    why = "no GPU on this host" if dev.kind == "gpu" else f"host has {len(host)} cores, profile needs more"
    return f"rank {rank} not pinned ({why}); {threads} threads; speeds from throttling or the virtual clock"
