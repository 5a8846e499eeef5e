"""Pinning plans from a profile, and the backend choice, without needing the hardware."""

from __future__ import annotations

import pytest

from distrepro.config.run_config import validate_config
from distrepro.engine.multiprocess.pinning import cpu_core_sets
from distrepro.engine.multiprocess.worker import choose_backend
from distrepro.job.resolve import build_job


@pytest.fixture(scope="module")
def cadp_job():
    cfg = validate_config(
        {"method": "ar_sgd", "profile": "cadp-ijcai25", "dataset": {"params": {"train_size": 64, "image_size": 8}}}
    )
    return build_job(cfg, 0)


@pytest.mark.smoke
def test_cpu_workers_get_disjoint_core_sets_of_the_profile_size(cadp_job):
    sets = cpu_core_sets(cadp_job, list(range(64)))
    assert sets is not None
    assert {r: len(c) for r, c in sets.items()} == {4: 4, 5: 4, 6: 16, 7: 8}  # the C-ADP CPU boxes
    cores = [c for s in sets.values() for c in s]
    assert len(cores) == len(set(cores))  # disjoint
    assert 0 not in sets  # GPU ranks are not given cores


@pytest.mark.smoke
def test_too_small_a_host_gets_no_plan(cadp_job):
    assert cpu_core_sets(cadp_job, [0, 1]) is None


@pytest.mark.smoke
def test_nccl_only_when_every_rank_has_a_gpu():
    assert choose_backend("auto", gpu_ranks_all=False) == "gloo"
    assert choose_backend("gloo", gpu_ranks_all=True) == "gloo"
    assert choose_backend("nccl", gpu_ranks_all=False) == "nccl"  # explicit choice is the user's


@pytest.mark.smoke
def test_multi_node_pins_only_the_ranks_on_this_host(cadp_job):
    from distrepro.engine.multiprocess.pinning import local_ranks

    # node 2 of a 2-ranks-per-node launch holds global ranks 4 and 5 (the two 4-core CPU boxes)
    here = local_ranks(rank=5, local_rank=1, local_world=2)
    assert here == [4, 5]
    sets = cpu_core_sets(cadp_job, list(range(8)), here)
    assert sets == {4: [0, 1, 2, 3], 5: [4, 5, 6, 7]}  # the 16- and 8-core ranks live elsewhere
