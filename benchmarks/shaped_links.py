"""Real shaped links against the emulator: gloo collectives between namespaces whose NICs ``tc`` rate-limits.

Every rank runs in the network namespace of its emulated node (:mod:`shaped_net`): one namespace per node on a
private bridge, the node's NIC an ``htb`` class of ``--rates`` Mbit/s in each direction, ranks of one node talking
over its unshaped loopback path. The ranks are real ``torch.distributed`` gloo processes (file rendezvous, as the
``--engine dist`` launcher starts them); rank 0 reports, per operation, the median over ``--reps`` of the slowest
rank's wall time (after a barrier) and the CPU time all ranks spent. The emulator's prediction comes from its own
code for a profile with the same layout and rates (:func:`emulated_profile`): ``CommCostModel`` for the ring
all-reduce (gloo runs a ring: ``allreduce_ring_chunked``), the max-min flow network (``distrepro.timing.network``)
for concurrent pairs through shared NICs.

Cases (each a node layout and the operations run on it): ring all-reduce on p = 2, 4, 8 single-rank nodes;
gossip pairs (independent pairs exchanging a model) on 4 and 8 nodes; m = 1, 2, 4 flows sharing one NIC (two
nodes of m ranks, rank i of one node exchanging with rank i of the other); a two-node hierarchical layout (2 × 2
and 2 × 4 ranks) all-reducing over all ranks.

Inputs of the prediction, each stated: the link bandwidth is the htb rate times the TCP goodput of a full frame,
1448 / 1514 (MSS with timestamps over a 1514-byte Ethernet frame, RFC 7323 §3 and IEEE 802.3) [D]; the per-message
latency α is measured in the same run (an 8-byte all-reduce between two unshaped nodes, 2 messages) [L]; the
intra-node (loopback) bandwidth is an estimate [E] that matters little at these rates. Nothing is fitted to a
shaped measurement. Needs root and network namespaces (``shaped_net.unavailable_reason``); ``netem`` delay is
used only with ``--delay-ms`` and only where the kernel has it (reported in the output either way).

Its parts, each a module beside it: ``shaped_cases.py`` (the cases and the emulator's prediction for each, which
need no root), ``shaped_ranks.py`` (the ranks in their namespaces: the timed collectives and what starts and stops
ranks); this module runs the AR-SGD training runs, compares and reports, and is the command.

Run ``sudo python benchmarks/shaped_links.py --help``; figures and commands live in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for _path in (str(REPO), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import shaped_net  # noqa: E402  (a sibling script, found through the path set above)
from rank_processes import kill_left, wait_ranks  # noqa: E402
from shaped_cases import GOODPUT, LOOPBACK_GBYTES_PER_S, Case, Op, cases, emulated_profile, predict  # noqa: E402
from shaped_ranks import MAX_RANKS, WORKER_TIMEOUT_S, rank_env, run_case, worker  # noqa: E402

OUT_DIR = REPO / "benchmarks" / "out"
#: what the tests and callers reach through this module (the cases and the ranks live in its sibling modules)
__all__ = [
    "GOODPUT",
    "LOOPBACK_GBYTES_PER_S",
    "MAX_RANKS",
    "WORKER_TIMEOUT_S",
    "Case",
    "Op",
    "cases",
    "emulated_profile",
    "main",
    "predict",
    "render",
    "run_case",
    "training_rows",
    "worker",
]


# ---------------------------------------------------------------------- short training runs (--engine dist)

#: the trained model: a CIFAR ResNet-18 at half width (2.8 M parameters, 11.2 MB of FP32 gradients per step, about
#: a third of a second of one core per step at batch 16): communication and compute of the same order at 100-400
#: Mbit/s
TRAIN_MODEL = {"name": "resnet18_cifar", "params": {"width": 32}}
TRAIN_BATCH = 16
TRAIN_STEPS = 8


def train_config(profile_path: Path, world: int) -> dict[str, Any]:
    """AR-SGD (DDP with overlap, the method's default) on synthetic 32x32 images, ``TRAIN_STEPS`` steps."""
    return {
        "name": f"shaped-train-{world}",
        "method": "ar_sgd",
        "method_params": {"lr": 0.05, "momentum": 0.9},
        "profile": str(profile_path),
        "dataset": {"name": "synthetic", "params": {"image_size": 32, "train_size": 4096, "test_size": 16}},
        "model": TRAIN_MODEL,
        "batch_size": TRAIN_BATCH,  # per worker
        "emulated_workload": None,
        "budget": {"steps": TRAIN_STEPS},
        "eval": {"times": 1},
        "engine": "dist",
        "dist": {"timeout_s": 600},
        "torch_threads": 1,
        "seeds": [0],
    }


#: the distributed engine's rank entry point, started with ``python -m`` as its launcher does
WORKER_MODULE = "distrepro.engine.multiprocess.worker"


def write_train_profile(path: Path, layout: tuple[int, ...], rate_mbit: float | None, latency_s: float,
                        flops_per_s: float) -> None:  # fmt: skip
    """The emulated profile of the shaped network, each rank a CPU as fast as the one-rank run measured."""
    import yaml

    data = emulated_profile(layout, rate_mbit, latency_s).to_yaml_dict()
    data["name"] = path.stem
    for node in data["nodes"]:
        for group in node["devices"]:
            group["effective_flops_per_s"] = flops_per_s
            group["source"] = "[L] a one-rank run of the same training in a namespace, this machine, same run"
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def run_training(layout: tuple[int, ...], rate_mbit: float | None, latency_s: float, flops_per_s: float,
                 cpu_quota: float | None = None) -> dict[str, float]:  # fmt: skip
    """One AR-SGD run of the distributed engine, each rank in its node's namespace: wall and emulated seconds."""
    import pickle

    world = sum(layout)
    case = Case(layout, ())
    with (
        tempfile.TemporaryDirectory(prefix="distrepro-shaped-train-") as tmp,
        shaped_net.ShapedNetwork(len(layout), rate_mbit, cpu_quota=cpu_quota) as net,
    ):
        out = Path(tmp)
        profile = out / f"shaped-train-{world}.yaml"
        write_train_profile(profile, layout, rate_mbit, latency_s, flops_per_s)
        from distrepro.config.run_config import validate_config

        cfg = validate_config(train_config(profile, world))
        job = {"config": cfg.model_dump(mode="json"), "seed": 0, "source": None, "run_id": None,
               "tracking_uri": None, "checkpoint_dir": None, "resume_from": None}  # fmt: skip
        (out / "job.json").write_text(json.dumps(job))
        env = rank_env()
        argv = [sys.executable, "-m", WORKER_MODULE, "--job", str(out / "job.json"), "--out", str(out)]
        procs: list[subprocess.Popen[bytes]] = []
        cpu0 = os.times()
        try:
            for rank in range(world):
                rank_argv = [*argv, "--rank", str(rank), "--world-size", str(world), "--init", f"file://{out}/rdv"]
                procs.append(
                    subprocess.Popen(net.command(case.node_of(rank), rank, rank_argv), env=env, start_new_session=True)
                )
            wait_ranks(procs, WORKER_TIMEOUT_S, f"a training rank of layout {layout}")
        finally:
            kill_left(procs)
        cpu1 = os.times()
        result = pickle.loads((out / "result.pkl").read_bytes())
        return {
            "wall_s": float(result.wall_s),
            "emulated_s": float(result.emulated_s),
            "cpu_s_all_ranks": (cpu1.children_user + cpu1.children_system)
            - (cpu0.children_user + cpu0.children_system),
        }


def proxy_flops_per_sample() -> float:
    """The training FLOPs per sample the engine charges the trained model itself (``emulated_workload: None``)."""
    from distrepro.config.run_config import validate_config
    from distrepro.job.resolve import build_job

    cfg = validate_config(train_config(REPO / "hardware_profiles" / "homogeneous-4.yaml", 1))
    return float(build_job(cfg, 0).proxy_flops_per_sample)


def training_rows(
    rates: list[float], latency_s: float, worlds: tuple[int, ...] = (2, 4), cpu_quota: float | None = None
) -> list[dict[str, Any]]:
    """Calibrate one rank's speed through the engine itself (one rank, one namespace, the same CPU quota), then
    train p ranks through the shaped network."""
    flops = proxy_flops_per_sample()
    solo = run_training((1,), None, latency_s, 1e12, cpu_quota)  # compute alone: no peer, nothing to send
    flops_per_s = flops * TRAIN_BATCH * TRAIN_STEPS / solo["wall_s"]
    rows = []
    for rate in rates:
        for world in worlds:
            got = run_training((1,) * world, rate, latency_s, flops_per_s, cpu_quota)
            rows.append(
                {
                    "rate_mbit": rate,
                    "case": f"AR-SGD training p={world} ({TRAIN_STEPS} steps)",
                    "layout": [1] * world,
                    "measured_s": got["wall_s"],
                    "measured_min_s": got["wall_s"],
                    "measured_max_s": got["wall_s"],
                    "cpu_s_all_ranks": got["cpu_s_all_ranks"],
                    "predicted_s": got["emulated_s"],
                    "error": got["emulated_s"] / got["wall_s"] - 1,
                    "solo_wall_s": solo["wall_s"],
                }
            )
    return rows


# ---------------------------------------------------------------------- the benchmark


def measure_latency(reps: int) -> float:
    """α: half the median of an 8-byte all-reduce between two unshaped nodes (a 2-rank ring sends 2 messages)."""
    probe = Case((1, 1), (Op("latency probe", "all_reduce", 8),))
    result = run_case(probe, None, reps=max(reps, 20), warmup=5)[0]
    return statistics.median(result["wall_s"]) / 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--rates", type=float, nargs="+", default=[100.0, 400.0], help="NIC rates, Mbit/s")
    parser.add_argument("--mbytes", type=float, default=4.0, help="payload per operation, MiB (default 4)")
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions per operation")
    parser.add_argument("--warmup", type=int, default=2, help="untimed repetitions first")
    parser.add_argument("--cpu-quota", type=float, help="cap each rank at this many cores (cgroup v1)")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="one-way netem delay per node (needs netem)")
    parser.add_argument("--quick", action="store_true", help="one two-node ring only")
    parser.add_argument("--no-training", action="store_true", help="collectives only, no AR-SGD training runs")
    parser.add_argument("--no-collectives", action="store_true", help="AR-SGD training runs only")
    parser.add_argument(
        "--swaps-only", action="store_true", help="pair exchanges only, each posted receive first and send first"
    )
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    reason = shaped_net.unavailable_reason()
    if reason:
        print(f"shaped_links: skipped: {reason}", file=sys.stderr)
        return 3
    netem = shaped_net.netem_available()
    if args.delay_ms and not netem:
        print("shaped_links: --delay-ms needs netem, which this kernel lacks", file=sys.stderr)
        return 2
    nbytes = int(args.mbytes * 2**20) // 4 * 4
    load0, wall0, cpu0 = os.getloadavg(), time.perf_counter(), os.times()
    latency_s = measure_latency(args.reps)
    rows = []
    for rate in [] if args.no_collectives else args.rates:
        for case in cases(nbytes, args.quick, args.swaps_only):
            results = run_case(case, rate, args.reps, args.warmup, args.cpu_quota, args.delay_ms)
            for op, res in zip(case.ops, results, strict=True):
                measured = statistics.median(res["wall_s"])
                ring = predict(case, op, rate, latency_s)
                row = {
                    "rate_mbit": rate,
                    "case": op.name,
                    "layout": list(case.layout),
                    "measured_s": measured,
                    "measured_min_s": min(res["wall_s"]),
                    "measured_max_s": max(res["wall_s"]),
                    "measured_all_s": res["wall_s"],
                    "cpu_s_all_ranks": statistics.median(res["cpu_s_all_ranks"]),
                    "predicted_s": ring,
                    "error": ring / measured - 1,
                }
                if op.kind == "all_reduce" and len(case.layout) < case.world:
                    row["predicted_hierarchical_s"] = predict(case, op, rate, latency_s, "hierarchical")
                rows.append(row)
    if not args.quick and not args.no_training and not args.swaps_only:
        rows += training_rows(args.rates, latency_s, cpu_quota=args.cpu_quota)
    end = os.times()
    summary = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "netem": netem,
        "delay_ms": args.delay_ms,
        "cpu_quota": args.cpu_quota,
        "payload_bytes": nbytes,
        "latency_s": latency_s,
        "load_before": load0,
        "load_after": os.getloadavg(),
        "wall_s": time.perf_counter() - wall0,
        "cpu_s_children": (end.children_user + end.children_system) - (cpu0.children_user + cpu0.children_system),
        "rows": rows,
    }
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "shaped_links.json").write_text(json.dumps(summary, indent=2))
    print(render(summary))
    return 0


def render(summary: dict[str, Any]) -> str:
    """The Markdown table of a run (what BENCHMARKS.md shows)."""
    lines = [
        f"payload {summary['payload_bytes'] / 2**20:.1f} MiB, α = {summary['latency_s'] * 1e6:.0f} µs (measured), "
        f"netem {'available' if summary['netem'] else 'not available (no added delay)'}, "
        f"CPU quota per rank: {summary['cpu_quota'] or 'none'}",
        "",
        "| rate (Mbit/s) | case | measured s (min-max) | emulator s | error | CPU s, all ranks |",
        "|---|---|---|---|---|---|",
    ]
    for r in summary["rows"]:
        hier = f" (hierarchical {r['predicted_hierarchical_s']:.3f})" if "predicted_hierarchical_s" in r else ""
        lines.append(
            f"| {r['rate_mbit']:g} | {r['case']} | {r['measured_s']:.3f} ({r['measured_min_s']:.3f}-"
            f"{r['measured_max_s']:.3f}) | {r['predicted_s']:.3f}{hier} | {r['error']:+.1%} | "
            f"{r['cpu_s_all_ranks']:.3f} |"
        )
    la, lb = summary["load_before"], summary["load_after"]
    lines.append("")
    lines.append(
        f"wall {summary['wall_s']:.0f} s, CPU of all ranks {summary['cpu_s_children']:.0f} s, load average "
        f"{la[0]:.2f} before / {lb[0]:.2f} after, {summary['cpus']} CPUs, kernel {summary['kernel']}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
