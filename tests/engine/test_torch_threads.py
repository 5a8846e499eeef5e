"""torch threads follow the environment (OMP_NUM_THREADS, SLURM, CPU affinity), not a number in a config."""

from __future__ import annotations

import os

import pytest

from distrepro.engine.torch_threads import available_cpus, default_threads, resolve_threads


@pytest.mark.smoke
def test_omp_num_threads_is_the_users_word_per_process() -> None:
    assert default_threads(4, {"OMP_NUM_THREADS": "3", "SLURM_CPUS_PER_TASK": "16"}) == (3, "OMP_NUM_THREADS")


def test_a_slurm_allocation_is_shared_by_the_ranks_on_the_host() -> None:
    assert default_threads(4, {"SLURM_CPUS_PER_TASK": "16"}) == (4, "SLURM_CPUS_PER_TASK")
    assert default_threads(32, {"SLURM_CPUS_PER_TASK": "16"}) == (1, "SLURM_CPUS_PER_TASK")


def test_without_either_the_affinity_mask_decides() -> None:
    assert default_threads(1, {"OMP_NUM_THREADS": "", "SLURM_CPUS_PER_TASK": "x"}) == (available_cpus(), "CPU affinity")
    if hasattr(os, "sched_getaffinity"):
        assert available_cpus() == len(os.sched_getaffinity(0))


def test_a_config_value_wins() -> None:
    assert resolve_threads(5) == (5, "config torch_threads")
    assert resolve_threads(None)[1] != "config torch_threads"


def test_no_shipped_cadp_config_pins_two_threads() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "methods"
    pinned = [p.name for p in root.glob("*/configs/*.yaml") if "torch_threads: 2" in p.read_text(encoding="utf-8")]
    assert pinned == []
