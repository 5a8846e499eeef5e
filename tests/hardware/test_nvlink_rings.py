"""Rings over a node whose GPUs are not all linked (distrepro/hardware/nvlink_rings.py): a DGX-1's hybrid cube-mesh."""

from __future__ import annotations

import pytest

from distrepro.hardware.nvlink_rings import DGX1_V100_NVLINKS, ring_links

pytestmark = pytest.mark.smoke


def test_the_dgx1_wiring_is_six_links_per_v100_and_symmetric() -> None:
    links = DGX1_V100_NVLINKS
    assert all(sum(row) == 6 for row in links)
    assert all(links[a][b] == links[b][a] for a in range(8) for b in range(8))
    assert all(links[a][a] == 0 for a in range(8))


def test_a_pair_gets_its_own_links_and_an_unlinked_pair_none() -> None:
    assert ring_links(DGX1_V100_NVLINKS, [0, 1]) == 1  # NV1
    assert ring_links(DGX1_V100_NVLINKS, [0, 3]) == 2  # NV2
    assert ring_links(DGX1_V100_NVLINKS, [0, 5]) == 0  # SYS: no NVLink between them


def test_a_quad_gets_four_rings_and_all_eight_get_six() -> None:
    """Two edge-disjoint Hamiltonian cycles fit in a quad (4 directed rings: 100 GB/s at 25 GB/s a link), three in the
    whole cube-mesh (6 rings: the V100's six links, as on an NVSwitch); a group across the quads with few links gets
    fewer."""
    assert ring_links(DGX1_V100_NVLINKS, range(4)) == 4
    assert ring_links(DGX1_V100_NVLINKS, range(4, 8)) == 4
    assert ring_links(DGX1_V100_NVLINKS, range(8)) == 6
    assert ring_links(DGX1_V100_NVLINKS, [0, 1, 4, 5]) == 2


def test_a_fully_linked_node_is_limited_by_its_links_per_gpu() -> None:
    """Four GPUs, one link per pair (three per GPU): one Hamiltonian cycle fits, the three links left over cannot
    close a second one, so two directed rings, not three."""
    clique = [[0 if a == b else 1 for b in range(4)] for a in range(4)]
    assert ring_links(clique, range(4)) == 2
    assert ring_links(clique, [0]) == 0
    with pytest.raises(ValueError, match="at most 8"):
        ring_links([[1] * 9 for _ in range(9)], range(9))


def test_dlperfs_node_is_wired_as_its_report_prints_it() -> None:
    """OneFlow's DLPerf report (Oneflow-Inc/DLPerf @ c89430ba, its ``nvidia-smi topo -m``): NV1 = 1 link, NV2 = 2,
    SYS = none; the matrix is the DGX-1's, so a ring over all 8 gets 6 links, over a quad 4."""
    from distrepro.hardware.nvlink_rings import DLPERF_V100_NVLINKS

    printed = """\
GPU0     X      NV1     NV1     NV2     NV2     SYS     SYS     SYS
GPU1    NV1      X      NV2     NV1     SYS     NV2     SYS     SYS
GPU2    NV1     NV2      X      NV2     SYS     SYS     NV1     SYS
GPU3    NV2     NV1     NV2      X      SYS     SYS     SYS     NV1
GPU4    NV2     SYS     SYS     SYS      X      NV1     NV1     NV2
GPU5    SYS     NV2     SYS     SYS     NV1      X      NV2     NV1
GPU6    SYS     SYS     NV1     SYS     NV1     NV2      X      NV2
GPU7    SYS     SYS     SYS     NV1     NV2     NV1     NV2      X"""
    count = {"X": 0, "SYS": 0, "NV1": 1, "NV2": 2}
    matrix = tuple(tuple(count[cell] for cell in line.split()[1:]) for line in printed.splitlines())
    assert matrix == DLPERF_V100_NVLINKS
    assert ring_links(DLPERF_V100_NVLINKS, range(8)) == 6 and ring_links(DLPERF_V100_NVLINKS, range(4)) == 4
