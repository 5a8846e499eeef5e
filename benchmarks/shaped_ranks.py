"""The measured side of ``benchmarks/shaped_links.py``: real gloo ranks, each in its node's shaped namespace.

Why a module of its own: ``shaped_links.py`` is the command (it compares, trains and reports); starting ranks in
the namespaces of :mod:`shaped_net` is what both its collectives (:func:`run_case`, each rank running
:func:`worker`) and its training runs need (:func:`rank_env`, :data:`WORKER_TIMEOUT_S`; the bounded wait and the
clean-up: :mod:`rank_processes`). The ranks are started as ``shaped_links.py --worker SPEC`` (:data:`ENTRY`), the
command's own hidden option, so a rank's command line is the command's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import shaped_net
from rank_processes import kill_left, wait_ranks
from shaped_cases import Case

REPO = Path(__file__).resolve().parents[1]
#: the script every collective rank runs, with ``--worker SPEC``
ENTRY = Path(__file__).resolve().parent / "shaped_links.py"
MAX_RANKS = 8
WORKER_TIMEOUT_S = 300


def rank_env() -> dict[str, str]:
    """The environment of a rank: gloo on the namespace's NIC, one thread, the repository importable."""
    return {
        **os.environ,
        "GLOO_SOCKET_IFNAME": shaped_net.NODE_IFNAME,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }


def worker(spec_path: str) -> int:
    """One rank: join the gloo group through the file store, time every op, rank 0 writes the results."""
    import torch
    import torch.distributed as dist

    spec = json.loads(Path(spec_path).read_text())
    rank, world = int(os.environ["DISTREPRO_SHAPED_RANK"]), int(spec["world"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=spec["init"], rank=rank, world_size=world)
    results = []
    for op in spec["ops"]:
        buf = torch.ones(op["nbytes"] // 4)
        recv = torch.empty_like(buf)
        partner = next((b if a == rank else a for a, b in op["pairs"] if rank in (a, b)), None)
        walls, cpus = [], []
        for rep in range(spec["warmup"] + spec["reps"]):
            dist.barrier()
            w0, c0 = time.perf_counter(), time.process_time()
            if op["kind"] == "all_reduce":
                dist.all_reduce(buf)
            elif op["kind"] == "send" and partner is not None:  # the first of each pair sends, the second receives
                if rank == op["pairs"][0][0]:
                    dist.send(buf, partner)
                else:
                    dist.recv(recv, partner)
            elif partner is not None:  # a swap, as the engine's Comm.exchange issues it (receive first) or not
                swap = [dist.P2POp(dist.irecv, recv, partner), dist.P2POp(dist.isend, buf, partner)]
                for req in dist.batch_isend_irecv(swap if op["recv_first"] else swap[::-1]):
                    req.wait()
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            stats = torch.tensor([wall, cpu], dtype=torch.float64)
            slowest = stats.clone()
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            dist.all_reduce(stats, op=dist.ReduceOp.SUM)
            if rep >= spec["warmup"]:
                walls.append(float(slowest[0]))
                cpus.append(float(stats[1]))
        results.append({"name": op["name"], "wall_s": walls, "cpu_s_all_ranks": cpus})
    if rank == 0:
        Path(spec["out"]).write_text(json.dumps(results))
    dist.barrier()
    dist.destroy_process_group()
    return 0


def run_case(
    case: Case, rate_mbit: float | None, reps: int, warmup: int, cpu_quota: float | None = None, delay_ms: float = 0.0
) -> list[dict[str, Any]]:
    """Start the case's ranks in their namespaces, wait (bounded), return rank 0's per-op results."""
    if not 2 <= case.world <= MAX_RANKS:
        raise ValueError(f"a case has 2..{MAX_RANKS} ranks, got {case.world}")
    with (
        tempfile.TemporaryDirectory(prefix="distrepro-shaped-") as tmp,
        shaped_net.ShapedNetwork(len(case.layout), rate_mbit, delay_ms=delay_ms, cpu_quota=cpu_quota) as net,
    ):
        spec = {
            "world": case.world,
            "init": f"file://{tmp}/rendezvous",
            "out": f"{tmp}/result.json",
            "warmup": warmup,
            "reps": reps,
            "ops": [
                {"name": o.name, "kind": o.kind, "nbytes": o.nbytes, "pairs": o.pairs, "recv_first": o.recv_first}
                for o in case.ops
            ],
        }
        spec_file = Path(tmp) / "spec.json"
        spec_file.write_text(json.dumps(spec))
        env = rank_env()
        procs: list[subprocess.Popen[bytes]] = []
        try:
            for rank in range(case.world):
                argv = [sys.executable, str(ENTRY), "--worker", str(spec_file)]
                procs.append(
                    subprocess.Popen(
                        net.command(case.node_of(rank), rank, argv),
                        env={**env, "DISTREPRO_SHAPED_RANK": str(rank)},
                        start_new_session=True,
                    )
                )
            wait_ranks(procs, WORKER_TIMEOUT_S, f"a rank of layout {case.layout}")
        finally:
            kill_left(procs)
        return json.loads(Path(spec["out"]).read_text())
