"""A validation point's cluster as a hardware profile, and its compute figures.

Why a module of its own: :mod:`validation_model` prices a step on a profile; which profile a point's cluster is
(nodes of ``gpus_per_node`` GPUs, each link's line rate times its efficiency constant as the fold has it, a hybrid
cube-mesh node's rings on the links they can use) and what one GPU computes (``t_fixed`` and the peak from the
point's own 1-GPU row) are read from ``benchmarks/data/emulator_points.yaml`` here.
"""

from __future__ import annotations

from typing import Any

from distrepro.hardware.nvlink_rings import DGX1_V100_NVLINKS, DLPERF_V100_NVLINKS, ring_links
from distrepro.hardware.profiles import HardwareProfile

#: the workload name the validation's profiles charge (one token as one sample)
WORKLOAD = "validation"
#: a cluster's ``intra.nvlinks``: which GPU pairs of a node are linked, and by how many links
NVLINK_TOPOLOGIES = {"dgx1-v100": DGX1_V100_NVLINKS, "dlperf-v100": DLPERF_V100_NVLINKS}


def _tau_s(data: dict[str, Any], gpu: str) -> float:
    """Fixed step cost per transformer sublayer on ``gpu`` (seconds)."""
    return data["constants"]["tau_v100_ms"]["value"] * data["gpus"][gpu]["tau_ratio"] / 1000.0


def compute_figures(data: dict[str, Any], point: dict[str, Any], gpu: str) -> tuple[float, float]:
    """(t_fixed in s, peak in tokens/s) of the point's model on ``gpu``: t_fixed = sublayers x tau; the peak from
    the 1-GPU measurement ``peak_from`` (tokens/step, tokens/s) of the same table: peak = b / (t(b) - t_fixed).
    (A point whose batch is its 1-GPU row's gets t(b) = the measured 1-GPU step whatever t_fixed is.)"""
    sublayers = data["models"][point["model"]]["sublayers"]
    t_fixed = sublayers * _tau_s(data, gpu) if sublayers else 0.0
    ref = point.get("peak_from") or {"tokens_per_gpu": point["tokens_per_gpu"], "tok_s": point["measured"]}
    step = ref["tokens_per_gpu"] / ref["tok_s"]
    return t_fixed, ref["tokens_per_gpu"] / (step - t_fixed)


def _link(data: dict[str, Any], spec: dict[str, Any], members: int = 0) -> dict[str, Any]:
    """A profile link: the line rate times the efficiency constant the link names (the fold's value of it). A node
    whose GPUs are not all linked (``nvlinks:``, a hybrid cube-mesh) gives a ring over its first ``members`` GPUs
    the links its rings can use (:func:`distrepro.hardware.nvlink_rings.ring_links`) times one link's rate."""
    line = spec["line_gbytes_per_s"]
    if "nvlinks" in spec and members >= 2:
        line = ring_links(NVLINK_TOPOLOGIES[spec["nvlinks"]], range(members)) * spec["link_gbytes_per_s"]
    gbytes = line * data["constants"][spec["efficiency"]]["value"]
    return {"latency_us": spec["latency_us"], "bandwidth_gbytes_per_s": gbytes, "source": spec["source"]}


def cluster_profile(
    data: dict[str, Any], cluster: str, gpus: int, t_fixed: float = 0.0, peak: float = 1.0
) -> HardwareProfile:
    """An in-memory profile of ``gpus`` GPUs of ``cluster``, node by node, charging one token as one sample."""
    spec = data["clusters"][cluster]
    per = spec["gpus_per_node"]
    counts = [min(per, gpus - i) for i in range(0, gpus, per)]
    intra = _link(data, spec["intra"], counts[0])
    nic = _link(data, spec.get("nic") or spec["intra"])
    device = {
        "name": spec["gpu"],
        "kind": "gpu",
        "memory_gib": 16,
        "throughput_samples_per_s": {WORKLOAD: peak},
        "step_overhead_ms": {WORKLOAD: t_fixed * 1000.0},
        "source": "[D] benchmarks/data/emulator_points.yaml",
    }
    nodes = [{"name": f"n{i}", "nic": nic, "devices": [device | {"count": c}]} for i, c in enumerate(counts)]
    profile = {
        "schema_version": 2,
        "name": f"{cluster}-{gpus}",
        "description": "validation cluster",
        "nodes": nodes,
        "network": {"intra_node": intra, "inter_node": nic},
    }
    return HardwareProfile.model_validate(profile)
