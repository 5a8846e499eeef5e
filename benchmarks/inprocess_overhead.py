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
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import greenlet
import torch
import torch.nn.functional as F
import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from distrepro.api.tensors import grads_of  # noqa: E402
from distrepro.config.run_config import validate_config  # noqa: E402
from distrepro.engine.inprocess.run import InProcessEngine  # noqa: E402
from distrepro.job.resolve import Job, build_job  # noqa: E402

LR, MOMENTUM = 0.05, 0.9


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


# ---------------------------------------------------------------------------- engine side


class _Stamps:
    """RunObserver that records the wall time at the end of every lockstep iteration."""

    def __init__(self) -> None:
        self.t: list[tuple[float, float]] = []

    def on_allocation(self, epoch: int, allocation: Any) -> None:
        pass

    def on_eval(self, record: Any) -> None:
        pass

    def on_progress(self, fraction: float, emulated_s: float) -> None:
        self.t.append((time.perf_counter(), time.process_time()))


def make_job(
    method: str,
    k: int,
    batch: int,
    steps: int,
    image_size: int,
    train_size: int,
    period: int,
    bundle: Any = None,
    test_size: int = 512,
) -> Job:
    params: dict[str, Any] = {"lr": LR, "momentum": MOMENTUM}
    if method == "local_sgd":
        params["period"] = period
    cfg = validate_config(
        {
            "name": f"bench-{method}-k{k}",
            "method": method,
            "method_params": params,
            "profile": f"bench-homogeneous-{k}",
            "dataset": {
                "name": "synthetic",
                "params": {"image_size": image_size, "train_size": train_size, "test_size": test_size},
            },
            "model": {"name": "small_cnn"},
            "batch_size": batch,
            "budget": {"steps": steps},
            "eval": {"every_steps": steps + 1000},  # only the final evaluation runs (outside the timing)
            "torch_threads": torch.get_num_threads(),
        }
    )
    return build_job(cfg, 0, bundle=bundle)


def engine_run(job: Job) -> list[tuple[float, float]]:
    stamps = _Stamps()
    InProcessEngine().run(job, stamps)
    if len(stamps.t) != job.config.budget.steps:
        raise RuntimeError(f"expected {job.config.budget.steps} progress stamps, got {len(stamps.t)}")
    return stamps.t


# ---------------------------------------------------------------------------- plain side


class _Shard:
    """Endless reshuffled batches from one worker's shard (randperm per pass, one index_select)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor, batch: int, seed: int) -> None:
        self.x, self.y, self.idx, self.batch = x, y, idx, batch
        self.gen = torch.Generator().manual_seed(seed)
        self.order = self.idx[torch.randperm(len(self.idx), generator=self.gen)]
        self.pos = 0

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.pos + self.batch > len(self.order):
            self.order = self.idx[torch.randperm(len(self.idx), generator=self.gen)]
            self.pos = 0
        i = self.order[self.pos : self.pos + self.batch]
        self.pos += self.batch
        return self.x.index_select(0, i), self.y.index_select(0, i)


@torch.no_grad()
def _average(per_replica: list[list[torch.Tensor]]) -> None:
    """Flatten every replica's tensors, take the mean over replicas, copy it back into all."""
    flat = torch.stack([torch.cat([t.reshape(-1) for t in ts]) for ts in per_replica]).mean(0)
    numels = [t.numel() for t in per_replica[0]]
    for ts in per_replica:
        for t, v in zip(ts, flat.split(numels), strict=True):
            t.copy_(v.view_as(t))


def plain_run(job: Job, method: str, steps: int, period: int) -> list[tuple[float, float]]:
    k, batch = job.world_size, job.batch_sizes[0]
    base = job.make_model()
    models = [copy.deepcopy(base) for _ in range(k)]
    opts = [torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM) for m in models]
    params = [list(m.parameters()) for m in models]
    x, y = job.bundle.train_tensors
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    shards = [_Shard(x, y, s, batch, r) for r, s in enumerate(perm.chunk(k))]
    loss_sum = 0.0
    stamps: list[tuple[float, float]] = []
    for step in range(steps):
        for r in range(k):
            xb, yb = shards[r].next()
            models[r].zero_grad(set_to_none=True)
            loss = F.cross_entropy(models[r](xb), yb)
            loss.backward()
            loss_sum += loss.item()
            if method == "local_sgd":
                opts[r].step()
        if method == "ar_sgd":
            _average([[p.grad for p in ps] for ps in params])
            for opt in opts:
                opt.step()
        elif (step + 1) % period == 0:
            _average([[p.data for p in ps] for ps in params])
        stamps.append((time.perf_counter(), time.process_time()))
    return stamps


# ---------------------------------------------------------------------------- measurement


def _cpu_times() -> tuple[int, int] | None:
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(fields), fields[3] + fields[4]  # total, idle + iowait


def busy_fraction(interval: float = 1.0) -> float | None:
    """Fraction of all CPUs busy over ``interval`` seconds while this process sleeps (= other load)."""
    a = _cpu_times()
    time.sleep(interval)
    b = _cpu_times()
    if a is None or b is None or b[0] == a[0]:
        return None
    return 1.0 - (b[1] - a[1]) / (b[0] - a[0])


def wait_quiet(threshold: float | None, timeout: float) -> float | None:
    """Sleep until other processes use at most ``threshold`` of the CPUs (or ``timeout`` passes)."""
    busy = busy_fraction(0.5)
    if threshold is None or busy is None:
        return busy
    start = time.perf_counter()
    while busy > threshold and time.perf_counter() - start < timeout:
        print(f"    waiting: other processes keep {_pct(busy)} of the CPUs busy", flush=True)
        busy = busy_fraction(5.0)
    return busy


def per_step_ms(stamps: list[tuple[float, float]], warmup: int) -> tuple[float, float]:
    """(wall, process CPU) milliseconds per step over the steps after the warm-up."""
    n = len(stamps) - warmup
    (w0, c0), (w1, c1) = stamps[warmup - 1], stamps[-1]
    return (w1 - w0) / n * 1e3, (c1 - c0) / n * 1e3


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def _run_variant(variant: str, job: Job, method: str, args: argparse.Namespace) -> tuple[float, float]:
    total = job.config.budget.steps
    stamps = engine_run(job) if variant == "engine" else plain_run(job, method, total, args.period)
    return per_step_ms(stamps, args.warmup)


def measure(method: str, k: int, args: argparse.Namespace, image_size: int, bundles: dict[int, Any]) -> dict[str, Any]:
    steps = args.k_steps.get(k, args.steps)
    bundle = bundles.get(image_size)
    job = make_job(method, k, args.batch, steps + args.warmup, image_size, args.train_size, args.period, bundle)
    bundles[image_size] = job.bundle
    # an untimed short run of each variant first (allocator, OpenMP pool, first touch of pages)
    short = make_job(
        method, k, args.batch, args.warmup + args.period, image_size, args.train_size, args.period, job.bundle
    )
    _run_variant("engine", short, method, args)
    _run_variant("plain", short, method, args)
    threads = torch.get_num_threads()
    min_ratio = args.min_cpu_share * min(threads, os.cpu_count() or threads) if args.metric == "wall" else 0.0
    kept: dict[str, list[tuple[float, float]]] = {"engine": [], "plain": []}
    dropped: list[dict[str, Any]] = []
    busy_before: list[float | None] = []
    rep = 0
    while len(kept["engine"]) < args.reps:
        busy = wait_quiet(args.quiet, args.quiet_timeout)
        order = ("engine", "plain") if rep % 2 == 0 else ("plain", "engine")
        rep += 1
        pair = {v: _run_variant(v, job, method, args) for v in order}
        ok = all(cpu / wall >= min_ratio for wall, cpu in pair.values())
        (ew, ec), (pw, pc) = pair["engine"], pair["plain"]
        line = (
            f"  {method} K={k} {image_size}px pair {rep}: wall engine {ew:.1f} / plain {pw:.1f} ms/step, "
            f"CPU engine {ec:.1f} / plain {pc:.1f} ms/step (CPU/wall {ec / ew:.2f} / {pc / pw:.2f}, "
            f"other load before {_pct(busy)})"
        )
        if ok:
            busy_before.append(busy)
            for v in order:
                kept[v].append(pair[v])
        else:
            dropped.append({"engine": pair["engine"], "plain": pair["plain"], "other_busy_before": busy})
            line += " DROPPED: process did not get its CPUs"
            if len(dropped) > args.max_dropped:
                raise SystemExit(f"too many disturbed pairs ({len(dropped)}); the machine is busy, try later")
        print(line, flush=True)
    samples = k * args.batch
    row: dict[str, Any] = {
        "method": method,
        "k": k,
        "image_size": image_size,
        "batch": args.batch,
        "timed_steps": steps,
        "warmup_steps": args.warmup,
        "other_busy_before_pair": busy_before,
        "dropped_pairs": dropped,
    }
    for metric, index in (("wall", 0), ("cpu", 1)):
        row[metric] = _summary([e[index] for e in kept["engine"]], [p[index] for p in kept["plain"]], k, samples)
    return row


def _summary(eng: list[float], pln: list[float], k: int, samples: int) -> dict[str, Any]:
    """Medians, per-pair overheads and per-worker costs of one metric (ms per step)."""
    overheads = [(e / p - 1) * 100 for e, p in zip(eng, pln, strict=True)]
    e_med, p_med = statistics.median(eng), statistics.median(pln)
    return {
        "engine_ms": eng,
        "plain_ms": pln,
        "engine_ms_median": e_med,
        "plain_ms_median": p_med,
        "overhead_pct": overheads,
        "overhead_pct_median": statistics.median(overheads),
        "overhead_pct_min": min(overheads),
        "overhead_pct_max": max(overheads),
        "overhead_pct_of_medians": (e_med / p_med - 1) * 100,
        "engine_samples_per_s": samples / e_med * 1e3,
        "plain_samples_per_s": samples / p_med * 1e3,
        "engine_ms_per_worker_step": e_med / k,
        "plain_ms_per_worker_step": p_med / k,
        "engine_extra_ms_per_worker_step": (e_med - p_med) / k,
    }


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
        "plain_average_us_per_worker": best_us(lambda: _average(grads), 50) / k,
    }
    # the engine's collective arithmetic, called directly (private API: skipped if it changed)
    try:
        from distrepro.engine.inprocess import comm as ic

        class _Fabric:
            cost = job.cost

            def charged(self, nbytes: float) -> float:
                return nbytes

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
    """sha256 over the Python sources of distrepro/, methods/ and this script: which engine was timed."""
    h = hashlib.sha256()
    files = sorted([*REPO.glob("distrepro/**/*.py"), *REPO.glob("methods/**/*.py"), Path(__file__).resolve()])
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
