"""The classes a validation point is counted in: what a timing verdict of the same class carries as its band.

Why a module of its own: the error bands (``benchmarks/validation_bands.py``) and the scores
(``benchmarks/validate_emulator.py``) both group points by these classes, each read from the point's own fields.
"""

from __future__ import annotations

from typing import Any

#: the axes a point is classed on, each from its fields (:func:`point_classes`)
CLASS_AXES = ("workload", "interconnect", "collective", "workload_interconnect")
WORKLOAD_CLASSES = {
    "compute_single_gpu": "compute-bound step on one GPU (t_fixed + b / peak at a batch other than the measured one)",
    "ddp_allreduce_intra_node": "data-parallel training (PyTorch DDP), bucketed all-reduce within one node",
    "ddp_allreduce_inter_node": "data-parallel training, all-reduce across nodes (DDP or the engine's All-Reduce)",
    "gossip_neighbour_exchange": "decentralized training, each rank's exchange with its topology's neighbours across "
    "nodes, overlapped with the next iteration (Decent-DP: AER; complete, every rank a neighbour)",
    "collective_microbenchmark": "one all-reduce alone (nccl-tests all_reduce_perf)",
}
#: an engine cell's method: (workload class, collective)
ENGINE_METHODS = {
    "allreduce": ("ddp_allreduce_inter_node", "all_reduce"),
    "decent-aer": ("gossip_neighbour_exchange", "gossip"),
    # classed as the harness classes its arm (every Decent-DP arm exchanges with its neighbours); its collective is
    # one all-reduce over all ranks
    "decent-complete": ("gossip_neighbour_exchange", "all_reduce"),
}
#: classes the points cannot support, and why
NOT_COVERED = {
    "strong_scaling": "no series shrinks the per-GPU batch as GPUs are added: the scaling series here keep it (weak "
    "scaling), or keep the global batch through the accumulation count at a fixed micro-batch (DeepLearningExamples' "
    "BERT on 2-32 nodes); Fig. 6 fixes 25K tokens per iteration and so shrinks each GPU's batch, but only its 16-GPU "
    "cells are points",
}


def point_classes(data: dict[str, Any], point: dict[str, Any]) -> dict[str, str]:
    """The point's class on each axis, from its fields: workload (:data:`WORKLOAD_CLASSES`), interconnect (the
    slowest fabric its traffic crosses: ``none`` on one GPU) and collective."""
    kind = point["kind"]
    if kind == "compute_throughput":
        classes = {"workload": "compute_single_gpu", "interconnect": "none", "collective": "none"}
    elif kind in ("ddp_throughput", "nccl_allreduce"):
        spec = data["clusters"][point["cluster"]]
        across = point["gpus"] > spec["gpus_per_node"]
        link = (spec.get("nic") or spec["intra"]) if across else spec["intra"]
        if kind == "nccl_allreduce":
            workload = "collective_microbenchmark"
        else:
            workload = "ddp_allreduce_inter_node" if across else "ddp_allreduce_intra_node"
        classes = {"workload": workload, "interconnect": link["fabric"], "collective": "all_reduce"}
    elif kind == "engine_cell":
        setup = data["setups"][point["setup"]]
        workload, collective = ENGINE_METHODS[point["method"]]
        fabric = setup["inter_node" if point["gpus"] > setup["gpus_per_node"] else "intra_node"]
        classes = {"workload": workload, "interconnect": fabric, "collective": collective}
    else:
        raise ValueError(f"point {point['id']}: unknown kind {kind!r}")
    return classes | {"workload_interconnect": f"{classes['workload']}/{classes['interconnect']}"}
