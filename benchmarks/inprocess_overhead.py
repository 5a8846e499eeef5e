"""In-process engine overhead: K virtual workers under ``InProcessEngine`` vs a plain PyTorch loop.

Both sides do the same work per step: K replicas of ``small_cnn`` (same initial weights, from
``Job.make_model``), each takes a batch of B samples of the synthetic dataset (``index_select`` of
its shard), forward, cross-entropy, backward, SGD-with-momentum step.

* ``ar_sgd``: the plain loop runs forward/backward for every replica, then averages the gradients
  with plain torch ops (flatten every replica's gradients, mean over replicas, copy back), then
  steps every optimizer: the same math as the engine's AR-SGD (one all-reduce of the whole flat
  gradient bucket per step, replicas stay identical).
* ``local_sgd``: the plain loop runs forward/backward/step per replica and every ``period`` steps
  averages the parameters the same way.

The engine side is ``distrepro.job.resolve.build_job`` + ``InProcessEngine().run(job)`` with evaluation pushed
past the budget (only the final evaluation runs). Timing on the engine side comes from an observer
that stamps ``time.perf_counter()`` in ``on_progress``, which the engine calls once per lockstep
iteration, after all K workers finished it. A run's time per step is ``(t[N] - t[W]) / (N - W)``
over steps W+1..N, on both sides the same way: warm-up steps, per-run setup (model copies,
greenlets, optimizer creation) and the final evaluation are all outside the timed window.

Repetitions interleave the two variants in ABBA order (engine, plain, plain, engine, ...), and
the overhead is computed per pair of adjacent runs, so slow drift of the VM affects both sides.
Every run also records this process's CPU time (``time.process_time``) over the same window. The
machine is shared: before each pair the script waits until other processes leave the CPUs idle
(``--quiet``), and with ``--metric wall`` a pair is dropped and repeated when a run got less than
``--min-cpu-share`` of its threads' CPU time (another process took the cores mid-run); dropped
pairs are counted in the table and kept in the JSON. ``--metric cpu --threads 1`` measures CPU
time instead, which a busy machine disturbs far less, at the price of measuring one thread.

``--profile K ...`` adds a cProfile (CPU-time timer) of one engine run per K; ``--components`` instead
times pieces of a worker-step alone (compute charge, ``grads_of``, the engine's and the plain loop's
gradient averaging, a greenlet switch), to say where the engine's own per-worker-step cost goes.

Its parts, each a module beside it: ``inprocess_reference.py`` (the plain-PyTorch loop) and
``inprocess_timing.py`` (the engine's job and run, the timed window, the ABBA pairs on a quiet machine and their
summary); this module profiles, times the components, reports and is the command.

Run ``python benchmarks/inprocess_overhead.py --help``; figures and commands live in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import datetime as dt
import hashlib
import io
import json
import os
import platform
import pstats
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import greenlet
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from inprocess_reference import LR, MOMENTUM, average  # noqa: E402
from inprocess_timing import engine_run, make_job, measure  # noqa: E402

from distrepro.api.tensors import grads_of  # noqa: E402

# ---------------------------------------------------------------------------- profiles


def write_profiles(folder: Path, ks: list[int]) -> None:
    """Homogeneous K-worker profiles ``bench-homogeneous-<K>`` copied from ``homogeneous-4``."""
    src = REPO / "hardware_profiles"
    base = yaml.safe_load((src / "homogeneous-4.yaml").read_text(encoding="utf-8"))
    for k in ks:
        data = copy.deepcopy(base)
        data["name"] = f"bench-homogeneous-{k}"
        data["description"] = f"{k} identical RTX 3090 (homogeneous-4 scaled to {k} ranks) for benchmarks."
        data["sources"] = [*data.get("sources", []), "benchmarks/inprocess_overhead.py: count scaled to K [E]"]
        data["nodes"][0]["devices"][0]["count"] = k
        (folder / f"bench-homogeneous-{k}.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    # the workload table lives next to the profiles; copy it so nothing else changes
    (folder / "workloads.yaml").write_text((src / "workloads.yaml").read_text(encoding="utf-8"), encoding="utf-8")


# ---------------------------------------------------------------------------- where the cost goes


def profile_engine(method: str, k: int, args: argparse.Namespace, image_size: int, top: int) -> str:
    """cProfile (CPU-time timer) of one engine run after an untimed one: top functions by own and
    cumulative time."""
    steps = args.k_steps.get(k, args.steps) + args.warmup
    # a tiny test set: the final evaluation (outside the timed window of the benchmark) would
    # otherwise show up in the profile as extra convolution time
    job = make_job(method, k, args.batch, steps, image_size, args.train_size, args.period, test_size=8)
    engine_run(job)
    prof = cProfile.Profile(time.process_time)  # CPU time: other processes on the box do not count
    prof.enable()
    engine_run(job)
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    n = steps * k
    out.write(
        f"=== cProfile (CPU time): {method} K={k} {image_size}px B={args.batch}, {steps} steps = {n} "
        f"worker-steps, whole run (setup and warm-up included) ===\n"
    )
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    out.write("--- harness code only (distrepro/, methods/), by cumulative time ---\n")
    stats.sort_stats("cumulative").print_stats(r"/distrepro/|/methods/", top)
    return out.getvalue()


def components(k: int, args: argparse.Namespace, image_size: int) -> dict[str, float | None]:
    """Microseconds per call (best of 5 ``timeit`` repeats) of pieces of one worker-step, run alone."""

    def best_us(fn: Any, number: int) -> float:
        return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6

    job = make_job("ar_sgd", k, args.batch, 8, image_size, args.train_size, args.period, test_size=8)
    models = [job.make_model() for _ in range(k)]
    for m in models:
        for p in m.parameters():
            p.grad = torch.randn_like(p)
    grads = [[p.grad for p in m.parameters()] for m in models]
    out: dict[str, float | None] = {
        "compute_charge_us": best_us(lambda: job.compute_seconds(k - 1, args.batch, 7, 1.0), 2000),
        "grads_of_us": best_us(lambda: grads_of(models[0]), 2000),
        "plain_average_us_per_worker": best_us(lambda: average(grads), 50) / k,
    }
    # the engine's collective arithmetic, called directly (private API: skipped if it changed)
    try:
        from distrepro.engine.inprocess import comm as ic

        class _Fabric:
            cost = job.cost

            def charged(self, nbytes: float, bucket: Any = None, extra: float = 0.0) -> float:
                return nbytes + extra  # the payload as it is: no emulated bucket, no workload scaling

        arrivals = {r: ic._Arrival(0.0, grads[r], float(args.batch), None) for r in range(k)}
        ranks = tuple(range(k))

        def weighted() -> None:
            ic._weighted_behaviour(_Fabric(), ranks, arrivals, "ring")

        out["engine_weighted_average_us_per_worker"] = best_us(weighted, 50) / k
    except (AttributeError, TypeError) as exc:
        print(f"  engine collective not timed ({type(exc).__name__}: {exc})")
        out["engine_weighted_average_us_per_worker"] = None
    main = greenlet.getcurrent()

    def ping() -> None:
        while True:
            main.switch()

    g = greenlet.greenlet(ping)
    g.switch()
    out["greenlet_round_trip_us"] = best_us(g.switch, 20000)
    return out


# ---------------------------------------------------------------------------- report


def code_fingerprint() -> str:
    """sha256 over the Python sources of distrepro/, methods/ and this script with its two modules: which engine
    was timed, against which reference loop."""
    h = hashlib.sha256()
    here = Path(__file__).resolve()
    parts = [here, here.with_name("inprocess_reference.py"), here.with_name("inprocess_timing.py")]
    files = sorted([*REPO.glob("distrepro/**/*.py"), *REPO.glob("methods/**/*.py"), *parts])
    for f in files:
        h.update(str(f.relative_to(REPO)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def markdown(rows: list[dict[str, Any]], metric: str) -> str:
    """The table for ``metric`` ("wall": wall-clock time; "cpu": this process's CPU time)."""
    other = "cpu" if metric == "wall" else "wall"
    lines = [
        f"| method | K | px | timed steps | engine ms/step | plain ms/step | overhead % median (min…max) "
        f"| ({other} overhead %) | engine samples/s | plain samples/s | engine ms/worker-step "
        "| plain ms/worker-step | dropped pairs |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        r, o = row[metric], row[other]
        lines.append(
            f"| {row['method']} | {row['k']} | {row['image_size']} | {row['timed_steps']} "
            f"| {r['engine_ms_median']:.1f} | {r['plain_ms_median']:.1f} | {r['overhead_pct_median']:+.1f} "
            f"({r['overhead_pct_min']:+.1f}…{r['overhead_pct_max']:+.1f}) | ({o['overhead_pct_median']:+.1f}) "
            f"| {r['engine_samples_per_s']:.0f} | {r['plain_samples_per_s']:.0f} "
            f"| {r['engine_ms_per_worker_step']:.2f} | {r['plain_ms_per_worker_step']:.2f} "
            f"| {len(row['dropped_pairs'])} |"
        )
    return "\n".join(lines)


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def components_markdown(comps: dict[int, dict[str, float | None]]) -> str:
    names = [
        ("compute_charge_us", "compute charge (`Job.compute_seconds`), µs"),
        ("grads_of_us", "`grads_of(model)`, µs"),
        ("engine_weighted_average_us_per_worker", "engine `weighted_average` arithmetic, µs per worker"),
        ("plain_average_us_per_worker", "plain stack/mean/copy average, µs per worker"),
        ("greenlet_round_trip_us", "greenlet switch there and back, µs"),
    ]
    ks = sorted(comps)
    lines = ["| piece | " + " | ".join(f"K = {k}" for k in ks) + " |", "|---|" + "---:|" * len(ks)]
    for key, label in names:
        lines.append(f"| {label} | " + " | ".join(_fmt(comps[k].get(key)) for k in ks) + " |")
    return "\n".join(lines)


def _k_steps(text: str) -> tuple[int, int]:
    k, _, s = text.partition("=")
    return int(k), int(s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ks", type=int, nargs="+", default=[8, 32, 64], help="world sizes (default: 8 32 64)")
    ap.add_argument("--batch", type=int, default=32, help="per-worker batch size (default: 32)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per run, after warm-up (default: 20)")
    ap.add_argument(
        "--k-steps",
        type=_k_steps,
        nargs="*",
        default=[],
        metavar="K=STEPS",
        help="timed steps for some K instead of --steps, e.g. 64=8 (keeps big K affordable)",
    )
    ap.add_argument("--warmup", type=int, default=4, help="untimed steps at the start of every run (default: 4)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs of each variant, interleaved (default: 5)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[32, 16], help="image sizes in px (default: 32 16)")
    ap.add_argument(
        "--methods", nargs="+", default=["ar_sgd", "local_sgd"], choices=["ar_sgd", "local_sgd"], help="methods"
    )
    ap.add_argument(
        "--local-sizes",
        type=int,
        nargs="*",
        default=None,
        help="image sizes for local_sgd (default: the first of --sizes only)",
    )
    ap.add_argument("--period", type=int, default=4, help="local_sgd averaging period (default: 4)")
    ap.add_argument("--train-size", type=int, default=8192, help="synthetic training set size (default: 8192)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    ap.add_argument(
        "--profile",
        type=int,
        nargs="*",
        default=None,
        metavar="K",
        help="also cProfile one ar_sgd engine run at these K (first size); text goes to the JSON's folder",
    )
    ap.add_argument(
        "--quiet",
        type=float,
        default=0.25,
        metavar="FRACTION",
        help="before each repetition wait until other processes use at most this fraction of the CPUs\n"
        "(sampled from /proc/stat for 1 s; default 0.25; a negative value disables waiting)",
    )
    ap.add_argument("--quiet-timeout", type=float, default=120.0, help="longest wait for --quiet, seconds")
    ap.add_argument(
        "--min-cpu-share",
        type=float,
        default=0.95,
        help="drop (and repeat) a pair when a run's process CPU time / wall time is below this share of\n"
        "min(threads, cores): other processes took the CPUs (default 0.95; --metric wall only)",
    )
    ap.add_argument(
        "--metric",
        choices=["wall", "cpu"],
        default="wall",
        help="what the table shows: wall-clock time (default), or this process's CPU time, which other\n"
        "processes on a busy machine hardly disturb; use cpu with --threads 1 (with more threads,\n"
        "OpenMP spin-waiting counts as CPU time). Both are always in the JSON.",
    )
    ap.add_argument("--max-dropped", type=int, default=10, help="give up after this many dropped pairs per row")
    ap.add_argument(
        "--components",
        action="store_true",
        help="instead of the comparison, time pieces of a worker-step alone (compute charge, grads_of,\n"
        "the engine's and the plain loop's gradient averaging, a greenlet switch) at each K of --ks",
    )
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out", help="output folder for JSON")
    args = ap.parse_args(argv)
    args.k_steps = dict(args.k_steps)
    if args.quiet is not None and args.quiet < 0:
        args.quiet = None
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.warmup < 1:
        ap.error("--warmup must be >= 1 (the first step of a run includes its setup)")
    if "local_sgd" in args.methods:
        for k in args.ks:
            for n in (args.k_steps.get(k, args.steps), args.warmup):
                if n % args.period:
                    ap.error(f"with local_sgd, steps and warm-up must be multiples of --period (K={k}: {n})")
    local_sizes = args.local_sizes if args.local_sizes is not None else args.sizes[:1]

    machine = {
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "code_sha256": code_fingerprint(),
        "started_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    print(f"machine: {machine}", flush=True)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    comps: dict[int, dict[str, float | None]] = {}
    profiles: list[str] = []
    with tempfile.TemporaryDirectory(prefix="distrepro-bench-profiles-") as tmp:
        write_profiles(Path(tmp), sorted(set(args.ks) | set(args.profile or [])))
        os.environ["DISTREPRO_PROFILES_DIR"] = tmp
        bundles: dict[int, Any] = {}  # one synthetic dataset per image size, shared by all rows
        for k in args.ks if args.components else []:
            comps[k] = components(k, args, args.sizes[0])
            print(f"  K={k}: " + ", ".join(f"{n} {_fmt(v)}" for n, v in comps[k].items()), flush=True)
        for method in args.methods if not args.components else []:
            for size in args.sizes if method == "ar_sgd" else local_sizes:
                for k in args.ks:
                    rows.append(measure(method, k, args, size, bundles))
        for k in args.profile or []:
            profiles.append(profile_engine("ar_sgd", k, args, args.sizes[0], 25))
    elapsed = time.perf_counter() - started

    table = markdown(rows, args.metric) if rows else components_markdown(comps)
    print()
    print(table)
    print(f"\ntotal wall time {elapsed:.0f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = args.out / f"inprocess_overhead_{stamp}.json"
    record = {
        "command": "python benchmarks/inprocess_overhead.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine,
        "settings": {
            "ks": args.ks,
            "batch": args.batch,
            "steps": args.steps,
            "k_steps": args.k_steps,
            "warmup": args.warmup,
            "reps": args.reps,
            "sizes": args.sizes,
            "local_sizes": local_sizes,
            "period": args.period,
            "train_size": args.train_size,
            "quiet": args.quiet,
            "min_cpu_share": args.min_cpu_share,
            "lr": LR,
            "momentum": MOMENTUM,
        },
        "rows": rows,
        "components": comps,
        "metric": args.metric,
        "markdown": table,
        "wall_s": elapsed,
    }
    path.write_text(json.dumps(record, indent=2), encoding="utf-8")
    print(f"wrote {path}")
    if profiles:
        ppath = args.out / f"inprocess_overhead_{stamp}_cprofile.txt"
        ppath.write_text("\n".join(profiles), encoding="utf-8")
        print(f"wrote {ppath}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
