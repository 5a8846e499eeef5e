"""The budget check's slowest link: found over link classes, it is the one (and the pair) a scan of every pair finds."""

from __future__ import annotations

from itertools import combinations
from types import SimpleNamespace

import pytest
from link_reference import mixed_profile, reference_link

from distrepro.hardware.profiles import HardwareProfile, list_profiles, load_profile
from distrepro.orchestration.budget_check import _comm_s

pytestmark = pytest.mark.smoke


def reference_comm_s(profile: HardwareProfile, nbytes: float) -> tuple[float, tuple[int, int] | None]:
    """The check before link classes, transcribed: every pair of ranks, the first of the slowest wins."""
    worst, pair = 0.0, None
    for a, b in combinations(range(profile.world_size), 2):
        seconds = reference_link(profile, a, b).transfer_s(nbytes)
        if pair is None or seconds > worst:
            worst, pair = seconds, (a, b)
    return 2 * worst, pair


def job_on(profile: HardwareProfile, nbytes: float) -> SimpleNamespace:
    return SimpleNamespace(profile=profile, proxy_param_bytes=nbytes, bytes_scale=1.0, world_size=profile.world_size)


PROFILES = [mixed_profile(), *(p for p in (load_profile(n) for n in list_profiles()) if p.world_size <= 64)]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
@pytest.mark.parametrize("nbytes", [0.0, 1.0, 4e5, 1e12])
def test_slowest_link_and_its_pair_are_the_full_scans(profile: HardwareProfile, nbytes: float) -> None:
    assert _comm_s(job_on(profile, nbytes)) == reference_comm_s(profile, nbytes)  # type: ignore[arg-type]


def test_latency_and_bandwidth_can_pick_different_slowest_links() -> None:
    """Small messages are slowest over the highest latency, large ones over the lowest bandwidth: both found."""
    profile = mixed_profile()
    small, large = _comm_s(job_on(profile, 0.0)), _comm_s(job_on(profile, 1e12))  # type: ignore[arg-type]
    assert small[1] != large[1]


def test_one_rank_has_no_link_to_charge() -> None:
    profile = HardwareProfile.model_validate(
        {
            "schema_version": 1,
            "name": "one",
            "description": "test",
            "nodes": [
                {"name": "n", "devices": [{"name": "g", "kind": "gpu", "count": 1, "memory_gib": 1, "source": "[E] t"}]}
            ],
            "network": {
                "intra_node": {"latency_us": 1, "bandwidth_gbytes_per_s": 1, "source": "[E] t"},
                "inter_node": {"latency_us": 1, "bandwidth_gbytes_per_s": 1, "source": "[E] t"},
            },
        }
    )
    assert _comm_s(job_on(profile, 1e6)) == (0.0, None)  # type: ignore[arg-type]
