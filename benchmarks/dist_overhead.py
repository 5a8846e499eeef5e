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
import contextlib
import copy
import cProfile
import datetime as dt
import io
import itertools
import json
import os
import platform
import pstats
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

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


def make_config(args: argparse.Namespace, world: int, steps: int) -> dict[str, Any]:
    return {
        "name": f"dist-overhead-{world}",
        "method": "ar_sgd",
        "method_params": {"lr": 0.05, "momentum": 0.9, "weighting": args.weighting} | overlap_param(args),
        "profile": f"bench-homogeneous-{world}",
        "dataset": {"name": "synthetic", "params": {"image_size": args.image_size, "train_size": args.train_size}},
        "model": {"name": args.model},
        "batch_size": args.batch_size,
        "budget": {"steps": steps},
        "eval": {"times": 1},  # only the final evaluation (eval points at the budget are skipped)
        "engine": "dist",
        "dist": {"threads_per_rank": args.threads, "timeout_s": 120},
        "seeds": [0],
    }


def overlap_param(args: argparse.Namespace) -> dict[str, bool]:
    """``overlap`` only when pinned: by default the method's own default applies (what users run)."""
    return {} if args.overlap == "default" else {"overlap": args.overlap == "on"}


def rank_env(world: int) -> dict[str, str]:
    """The environment ``DistEngine`` gives its ranks (OMP threads = cores / world, at least 1)."""
    return {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // world))}


# ---------------------------------------------------------------------------- worker mode


class StampObserver:
    """Rank 0's observer: a perf_counter stamp per lockstep iteration."""

    def __init__(self) -> None:
        self.stamps: list[float] = []
        self.cpu: list[float] = []

    def on_allocation(self, epoch: int, allocation: Any) -> None:
        pass

    def on_eval(self, record: Any) -> None:
        pass

    def on_progress(self, fraction: float, emulated_s: float) -> None:
        self.stamps.append(time.perf_counter())
        self.cpu.append(time.process_time())


def worker_main(args: argparse.Namespace) -> int:
    """One rank, as ``distrepro.engine.multiprocess.worker.main`` does it, with a stamping observer on rank 0."""
    from datetime import timedelta

    import torch.distributed as dist

    from distrepro.api.overlap import buckets
    from distrepro.config.run_config import validate_config
    from distrepro.engine.multiprocess.pinning import pin_worker
    from distrepro.engine.multiprocess.run import DistRun, store_of_default_group
    from distrepro.engine.multiprocess.worker import choose_backend
    from distrepro.job.resolve import build_job

    spec = json.loads(Path(args.job).read_text())
    cfg = validate_config(spec["config"])
    job = build_job(cfg, int(spec["seed"]))
    method_params = job.params.model_dump(mode="json")
    n_buckets = len(buckets(job.make_model(), job.bytes_scale)) if method_params.get("overlap") else 1
    rank, world = args.rank, args.world_size
    note = pin_worker(job, rank, rank, world)
    backend = choose_backend(cfg.dist.backend, False)
    dist.init_process_group(
        backend,
        init_method=args.init,
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=cfg.dist.startup_timeout_s),
    )
    observer = StampObserver()  # on every rank: DistRun calls on_progress on each after every iteration
    run = DistRun(job, rank, store_of_default_group(), observer)
    prof = cProfile.Profile() if (args.cprofile and rank == 0) else None
    if prof is not None:
        prof.enable()
    run.run()
    if prof is not None:
        prof.disable()
    out: dict[str, Any] = {
        "variant": "distrepro",
        "rank": rank,
        "world_size": world,
        "pinning": note,
        "method_params": method_params,
        "buckets": n_buckets,
        "stamps": observer.stamps,
        "cpu": observer.cpu,
    }
    if prof is not None:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(45)
        out["cprofile"] = buf.getvalue()
    Path(args.stamps_out.replace("{rank}", str(rank))).write_text(json.dumps(out))
    dist.destroy_process_group()
    return 0


# ---------------------------------------------------------------------------- launching


def _run_ranks(cmds: list[list[str]], env: dict[str, str], timeout_s: float) -> None:
    procs = [subprocess.Popen(c, env=env, start_new_session=True, cwd=REPO) for c in cmds]
    try:
        deadline = time.monotonic() + timeout_s
        for p in procs:
            rc = p.wait(timeout=max(1.0, deadline - time.monotonic()))
            if rc != 0:
                raise RuntimeError(f"rank process {p.args} exited with {rc}")
    finally:
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def run_distrepro(args: argparse.Namespace, world: int, steps: int, cprofile: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dist-overhead-") as tmp:
        folder = Path(tmp)
        job_file = folder / "job.json"
        job_file.write_text(json.dumps({"config": make_config(args, world, steps), "seed": 0}))
        stamps = str(folder / "stamps.{rank}.json")
        init = f"file://{folder / 'rendezvous'}"
        base = [sys.executable, str(Path(__file__).resolve()), "--worker", "--job", str(job_file)]
        base += ["--stamps-out", stamps, "--init", init, "--world-size", str(world)]
        if cprofile:
            base.append("--cprofile")
        _run_ranks([[*base, "--rank", str(r)] for r in range(world)], rank_env(world), args.timeout)
        return read_ranks(stamps, world)


def run_plain(args: argparse.Namespace, world: int, steps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="plain-ddp-") as tmp:
        folder = Path(tmp)
        stamps = str(folder / "stamps.{rank}.json")
        init = f"file://{folder / 'rendezvous'}"
        base = [sys.executable, str(REPO / "benchmarks" / "plain_ddp.py"), "--steps", str(steps)]
        base += ["--batch-size", str(args.batch_size), "--threads", str(args.threads), "--out", stamps]
        base += ["--image-size", str(args.image_size), "--train-size", str(args.train_size), "--model", args.model]
        base += ["--profile", f"bench-homogeneous-{world}", "--init", init, "--world-size", str(world)]
        _run_ranks([[*base, "--rank", str(r)] for r in range(world)], rank_env(world), args.timeout)
        return read_ranks(stamps, world)


def read_ranks(template: str, world: int) -> dict[str, Any]:
    """Rank 0's record, with every rank's CPU stamps under ``cpu_by_rank``."""
    recs = [json.loads(Path(template.replace("{rank}", str(r))).read_text()) for r in range(world)]
    return {**recs[0], "cpu_by_rank": [r["cpu"] for r in recs]}


def run_e2e(args: argparse.Namespace, world: int, steps: int) -> float:
    """``RunResult.wall_s`` of a run through the real launcher (``DistEngine.run_cell``), no logger."""
    from distrepro.config.run_config import validate_config
    from distrepro.engine.multiprocess.launch import DistEngine
    from distrepro.job.resolve import build_job

    job = build_job(validate_config(make_config(args, world, steps)), 0)
    return DistEngine().run_cell(job, None).wall_s


def packing_micro(models: list[str], image_size: int) -> list[dict[str, Any]]:
    """Per-call cost of distrepro's gradient collective vs a bucket copy, in one process (gloo world of 1).

    With one rank the all-reduce itself costs nothing, so what is left is the Python and memory work
    around it: DistComm's packing (concatenations, clock slots, unpacking, copies back) against copying
    the gradients into one bucket and back, which is what DDP does without ``gradient_as_bucket_view``.
    """
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from distrepro.config.run_config import validate_config
    from distrepro.engine.clock import VirtualClock
    from distrepro.engine.multiprocess.comm import DistComm
    from distrepro.job.resolve import build_job

    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="dist-overhead-micro-")
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rdzv", rank=0, world_size=1)
    rows = []
    try:
        for name in models:
            cfg = {"method": "ar_sgd", "profile": "bench-homogeneous-2", "model": {"name": name}}
            cfg["dataset"] = {"name": "synthetic", "params": {"image_size": image_size}}
            job = build_job(validate_config(cfg), 0)
            model = job.make_model()
            x, y = job.bundle.tensors("train")
            F.cross_entropy(model(x[:32]), y[:32]).backward()
            grads = [p.grad for p in model.parameters()]
            comm = DistComm(0, 1, VirtualClock(0, 0), job.cost, 1.0)
            n = 1000 if sum(g.numel() for g in grads) < 1_000_000 else 30

            def timed(fn: Any, n: int = n) -> float:
                for _ in range(5):
                    fn()
                ts = []
                for _ in range(n):
                    t = time.perf_counter()
                    fn()
                    ts.append(time.perf_counter() - t)
                return 1e3 * statistics.median(ts)

            def bucket(grads: list[Any] = grads) -> None:
                flat = torch.cat([g.reshape(-1) for g in grads])
                dist.all_reduce(flat)
                for g, v in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
                    g.copy_(v.view_as(g))

            rows.append(
                {
                    "model": name,
                    "gradient_mb": sum(g.numel() for g in grads) * 4 / 1e6,
                    "bucket_ms": timed(bucket),
                    "mean_ms": timed(lambda grads=grads, comm=comm: comm.all_reduce_coalesced(grads, op="mean")),
                    "weighted_ms": timed(lambda grads=grads, comm=comm: comm.weighted_average(grads, weight=32)),
                    "charge_ms": timed(lambda job=job: job.compute_seconds(0, 32, 5, 1.0)),
                }
            )
    finally:
        dist.destroy_process_group()
    return rows


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
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            json.dumps({"benchmark": "dist_overhead --packing", "machine": machine(), "rows": rows}, indent=1)
        )
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
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "benchmark": "dist_overhead",
                "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "command": " ".join([Path(sys.executable).name, *sys.argv]),
                "machine": machine(),
                "settings": {
                    k: v
                    for k, v in vars(args).items()
                    if k not in ("worker", "job", "stamps_out", "rank", "world_size", "init")
                },
                "runs": runs,
                "summary": summary,
                "e2e": e2e,
                "cprofile": profiles_txt,
                "total_s": time.monotonic() - t_start,
            },
            indent=1,
        )
    )
    print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
