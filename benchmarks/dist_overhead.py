"""Distributed engine overhead: AR-SGD under ``engine: dist`` vs a hand-written DDP script.

Both sides train ``small_cnn`` on the same synthetic data (same tensors, same initial weights),
with the same per-rank batch, the same number of ranks (gloo on CPU, one process per rank,
file rendezvous), the same torch threads per rank and the same ``OMP_NUM_THREADS``, and SGD with
momentum. The reference is ``benchmarks/plain_ddp.py`` (``DistributedDataParallel``: 25 MB buckets,
all-reduce overlapped with backward). distrepro's AR-SGD runs as users run it: ``overlap`` is left at
the method's default (``true`` since Harness v2: DDP's 25 MB buckets in reverse parameter order, each a
non-blocking packed all-reduce with the virtual-clock slots appended, launched at the bucket's emulated
ready time and waited for before the optimizer step; see ``distrepro/api/overlap.py`` and
``distrepro/engine/multiprocess/comm.py``), plus the harness's per-step bookkeeping. In real time the buckets are
all-reduced after the real backward (only their *virtual* times overlap it). ``--overlap on|off`` pins
the parameter instead; each rank records the resolved method parameters and its bucket count.

How distrepro's step time is measured without changing the engine: ``--worker`` mode is the
engine's own rank entry point (``distrepro/engine/multiprocess/worker.py``) step for step (``build_job``,
``pin_worker``, ``init_process_group``, ``DistRun(...).run()``) except that rank 0 gets an observer
whose ``on_progress`` (called by ``DistRun`` once per lockstep iteration, after the step's
all-reduce and bookkeeping) stamps ``time.perf_counter()``; no MLflow logger. The plain script
stamps after ``optimizer.step()``. Per run, the steady-state step time is the median of the step
durations after ``--warmup`` steps (the mean over the same window is reported too). Start-up, the
warm-up steps and the final evaluation are outside the window.

A cross-check (``--e2e``) goes through the real launcher (``DistEngine.run_cell``, the path of
``engine: dist``) and takes ``(wall_s(long budget) - wall_s(short budget)) / (long - short)`` from
``RunResult.wall_s``, which cancels start-up, the final evaluation and the first steps.

``--packing`` only times, in one process (a gloo group of one rank, so the all-reduce costs
nothing), the work around distrepro's gradient collective (concatenations, clock slots, unpacking,
copies back) against copying the gradients into one bucket and back, as DDP does.

Runs are interleaved in ABBA order (dist, plain, plain, dist, ...) for every world size, and the
overhead is computed per adjacent pair, so that the VM's slow drift hits both sides alike.

Run ``python benchmarks/dist_overhead.py --help``; figures and commands live in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

# its parts, each a module beside it: the rank processes of a run (and the --worker mode), the --packing timing,
# and the results file it shares with dist_fidelity.py; this module sets up, computes the statistics and reports
from dist_overhead_packing import packing_micro
from dist_overhead_ranks import make_config, run_distrepro, run_plain, worker_main
from result_json import write_json, write_results

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

OUT_DIR = REPO / "benchmarks" / "out"


# ---------------------------------------------------------------------------- setup


def write_profiles(folder: Path, worlds: list[int]) -> None:
    """``bench-homogeneous-<W>``: ``homogeneous-4`` with the device count set to W (+ workloads.yaml)."""
    src = REPO / "hardware_profiles"
    base = yaml.safe_load((src / "homogeneous-4.yaml").read_text(encoding="utf-8"))
    for w in worlds:
        data = copy.deepcopy(base)
        data["name"] = f"bench-homogeneous-{w}"
        data["description"] = f"{w} identical RTX 3090 (homogeneous-4 with count {w}) for benchmarks."
        data["nodes"][0]["devices"][0]["count"] = w
        (folder / f"bench-homogeneous-{w}.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (folder / "workloads.yaml").write_text((src / "workloads.yaml").read_text(encoding="utf-8"), encoding="utf-8")


# ---------------------------------------------------------------------------- end-to-end cross-check (--e2e)


def run_e2e(args: argparse.Namespace, world: int, steps: int) -> float:
    """``RunResult.wall_s`` of a run through the real launcher (``DistEngine.run_cell``), no logger."""
    from distrepro.config.run_config import validate_config
    from distrepro.engine.multiprocess.launch import DistEngine
    from distrepro.job.resolve import build_job

    job = build_job(validate_config(make_config(args, world, steps)), 0)
    return DistEngine().run_cell(job, None).wall_s


# ---------------------------------------------------------------------------- statistics


def step_stats(res: dict[str, Any], warmup: int) -> dict[str, float]:
    """Median and mean wall step time (ms) over the steps after ``warmup``; rank 0's CPU ms per step."""
    stamps, cpu = res["stamps"], res.get("cpu") or []
    dts = [b - a for a, b in itertools.pairwise(stamps)]
    window = dts[warmup:] if len(dts) > warmup else dts
    out = {
        "median_ms": 1e3 * statistics.median(window),
        "mean_ms": 1e3 * statistics.fmean(window),
        "p90_ms": 1e3 * sorted(window)[int(0.9 * (len(window) - 1))],
        "steps_timed": len(window),
    }
    if len(cpu) > warmup + 1:
        out["cpu_ms"] = 1e3 * (cpu[-1] - cpu[warmup]) / (len(cpu) - 1 - warmup)
    by_rank = res.get("cpu_by_rank") or []
    if by_rank and all(len(c) > warmup + 1 for c in by_rank):
        out["cpu_all_ms"] = sum(1e3 * (c[-1] - c[warmup]) / (len(c) - 1 - warmup) for c in by_rank)
    return out


def table(headers: list[str], rows: list[list[Any]]) -> str:
    def fmt(v: Any) -> str:
        return f"{v:.2f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "backend": "gloo",
    }


# ---------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worlds", type=int, nargs="+", default=[2, 4], help="rank counts (default 2 4)")
    ap.add_argument("--steps", type=int, default=400, help="steps per run (default 400)")
    ap.add_argument("--warmup", type=int, default=50, help="steps excluded at the start (default 50)")
    ap.add_argument("--reps", type=int, default=6, help="runs per variant and world size (default 6, ABBA)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank, both sides (default 1)")
    ap.add_argument(
        "--model", default="small_cnn", help="distrepro.training.models name, both sides (default small_cnn)"
    )
    ap.add_argument("--image-size", type=int, default=16)
    ap.add_argument("--train-size", type=int, default=4096)
    ap.add_argument("--weighting", choices=["equal", "samples"], default="equal", help="AR-SGD weighting")
    ap.add_argument(
        "--overlap",
        choices=["default", "on", "off"],
        default="default",
        help="AR-SGD overlap: the method's default (what users run; default), or pinned on/off",
    )
    ap.add_argument("--e2e", action="store_true", help="also time distrepro through DistEngine.run_cell")
    ap.add_argument("--e2e-short", type=int, default=50, help="short budget of the e2e difference (steps)")
    ap.add_argument("--cprofile", action="store_true", help="one extra cProfile'd distrepro run per world (rank 0)")
    ap.add_argument(
        "--packing",
        nargs="*",
        metavar="MODEL",
        default=None,
        help="only time the gradient collective's packing in one process for these models "
        "(default small_cnn resnet18_cifar) and exit",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run before it is killed")
    ap.add_argument("--out", default=str(OUT_DIR / "dist_overhead.json"), help="JSON results file")
    # worker mode (internal)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--job", help=argparse.SUPPRESS)
    ap.add_argument("--stamps-out", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--world-size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--init", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(args)
    profiles = Path(tempfile.mkdtemp(prefix="dist-overhead-profiles-"))
    try:
        write_profiles(profiles, sorted({*args.worlds, 2}))
        os.environ["DISTREPRO_PROFILES_DIR"] = str(profiles)
        return measure(args)
    finally:
        shutil.rmtree(profiles, ignore_errors=True)


def measure(args: argparse.Namespace) -> int:
    if args.packing is not None:
        rows = packing_micro(args.packing or ["small_cnn", "resnet18_cifar"], args.image_size)
        print("\n### Per-call cost of the gradient collective, one process (gloo world of 1), ms\n")
        print(
            table(
                ["model", "gradient MB", "bucket copy + all-reduce", "DistComm mean", "DistComm weighted", "charge"],
                [
                    [r["model"], f"{r['gradient_mb']:.2f}"]
                    + [f"{r[k]:.3f}" for k in ("bucket_ms", "mean_ms", "weighted_ms", "charge_ms")]
                    for r in rows
                ],
            )
        )
        write_json(args.out, {"benchmark": "dist_overhead --packing", "machine": machine(), "rows": rows})
        return 0
    runs: list[dict[str, Any]] = []
    t_start = time.monotonic()
    for rep in range(args.reps):
        for world in args.worlds:
            order = ["distrepro", "plain"] if rep % 2 == 0 else ["plain", "distrepro"]
            for variant in order:
                t0 = time.monotonic()
                res = (
                    run_distrepro(args, world, args.steps)
                    if variant == "distrepro"
                    else run_plain(args, world, args.steps)
                )
                stats = step_stats(res, args.warmup)
                load = os.getloadavg()[0]
                runs.append(
                    {"rep": rep, "world": world, "variant": variant, "run_s": time.monotonic() - t0, "load1": load}
                    | stats
                    | {k: res[k] for k in ("method_params", "buckets") if k in res}
                )
                arm = (
                    f" (overlap {res['method_params'].get('overlap')}, {res['buckets']} bucket(s))"
                    if "method_params" in res
                    else ""
                )
                print(
                    f"rep {rep} world {world} {variant:9s} median {stats['median_ms']:.2f} ms "
                    f"mean {stats['mean_ms']:.2f} ms cpu(all ranks) {stats['cpu_all_ms']:.2f} ms "
                    f"(run {time.monotonic() - t0:.1f} s, load {load:.1f}){arm}",
                    file=sys.stderr,
                    flush=True,
                )
    summary = []
    for world in args.worlds:
        mine = [r for r in runs if r["world"] == world]
        d = {r["rep"]: r for r in mine if r["variant"] == "distrepro"}
        p = {r["rep"]: r for r in mine if r["variant"] == "plain"}
        pairs = sorted(set(d) & set(p))
        if not pairs:
            continue
        over_med = [100 * (d[k]["median_ms"] / p[k]["median_ms"] - 1) for k in pairs]
        over_mean = [100 * (d[k]["mean_ms"] / p[k]["mean_ms"] - 1) for k in pairs]
        over_cpu = [100 * (d[k]["cpu_all_ms"] / p[k]["cpu_all_ms"] - 1) for k in pairs]
        dm = statistics.median(r["median_ms"] for r in d.values())
        pm = statistics.median(r["median_ms"] for r in p.values())
        summary.append(
            {
                "world": world,
                "distrepro_median_ms": dm,
                "plain_median_ms": pm,
                "distrepro_mean_ms": statistics.median(r["mean_ms"] for r in d.values()),
                "plain_mean_ms": statistics.median(r["mean_ms"] for r in p.values()),
                "overhead_pct_median_of_pairs": statistics.median(over_med),
                "overhead_pct_min": min(over_med),
                "overhead_pct_max": max(over_med),
                "overhead_pct_pooled": 100 * (dm / pm - 1),
                "overhead_mean_pct_median_of_pairs": statistics.median(over_mean),
                "distrepro_cpu_ms": statistics.median(r["cpu_all_ms"] for r in d.values()),
                "plain_cpu_ms": statistics.median(r["cpu_all_ms"] for r in p.values()),
                "cpu_overhead_pct_median_of_pairs": statistics.median(over_cpu) if over_cpu else float("nan"),
                "load1_median": statistics.median(r["load1"] for r in mine),
                "pairs": len(pairs),
            }
        )
    e2e = []
    if args.e2e:
        for world in args.worlds:
            for rep in range(max(1, args.reps // 2)):
                long_s = run_e2e(args, world, args.steps)
                short_s = run_e2e(args, world, args.e2e_short)
                per = 1e3 * (long_s - short_s) / (args.steps - args.e2e_short)
                e2e.append({"world": world, "rep": rep, "wall_long_s": long_s, "wall_short_s": short_s, "step_ms": per})
                print(f"e2e world {world} rep {rep}: {per:.2f} ms/step", file=sys.stderr, flush=True)
    profiles_txt = {}
    if args.cprofile:
        for world in args.worlds:
            profiles_txt[world] = run_distrepro(args, world, args.steps, cprofile=True).get("cprofile", "")

    arms = sorted({(str(r["method_params"].get("overlap")), r["buckets"]) for r in runs if "method_params" in r})
    arm = ", ".join(f"overlap {o}, {b} bucket(s)" for o, b in arms)
    print(
        f"\n### Distributed engine overhead (AR-SGD [{arm}] vs plain DDP, {args.model}), "
        f"{args.reps} runs per cell, ABBA\n"
    )
    print(
        table(
            [
                "ranks",
                "plain DDP ms/step",
                "distrepro ms/step",
                "overhead (median of pairs)",
                "pair range",
                "pooled",
                "overhead of means",
                "CPU ms/step (all ranks) plain / distrepro",
                "CPU overhead",
                "load avg",
            ],
            [
                [
                    s["world"],
                    s["plain_median_ms"],
                    s["distrepro_median_ms"],
                    f"{s['overhead_pct_median_of_pairs']:+.1f}%",
                    f"{s['overhead_pct_min']:+.1f}% … {s['overhead_pct_max']:+.1f}%",
                    f"{s['overhead_pct_pooled']:+.1f}%",
                    f"{s['overhead_mean_pct_median_of_pairs']:+.1f}%",
                    f"{s['plain_cpu_ms']:.2f} / {s['distrepro_cpu_ms']:.2f}",
                    f"{s['cpu_overhead_pct_median_of_pairs']:+.1f}%",
                    s["load1_median"],
                ]
                for s in summary
            ],
        )
    )
    if e2e:
        print("\n### Cross-check through DistEngine.run_cell (wall difference of two budgets)\n")
        print(
            table(
                ["ranks", "rep", f"wall {args.steps} steps s", f"wall {args.e2e_short} steps s", "ms/step"],
                [[r["world"], r["rep"], r["wall_long_s"], r["wall_short_s"], r["step_ms"]] for r in e2e],
            )
        )
    for world, txt in profiles_txt.items():
        print(f"\n### cProfile of rank 0, {world} ranks (cumulative)\n\n```\n{txt}\n```")
    write_results(
        args.out,
        "dist_overhead",
        machine(),
        {k: v for k, v in vars(args).items() if k not in ("worker", "job", "stamps_out", "rank", "world_size", "init")},
        {"runs": runs, "summary": summary, "e2e": e2e, "cprofile": profiles_txt},
        t_start,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
