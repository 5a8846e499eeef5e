"""The timed runs of ``benchmarks/inprocess_overhead.py``: one engine run and one plain run timed per step, paired in
ABBA order on a shared machine, and each metric's pairs summarised.

Why a module of its own: how a run is timed decides what the overhead figure means, so the window (steps after the
warm-up, the same on both sides), the wait for a quiet machine and the rule that drops a disturbed pair are kept
together here, apart from the command line and the report. :class:`Stamps` is also the observer
``benchmarks/batched_replicas.py`` times its runs with.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from inprocess_reference import LR, MOMENTUM, plain_run

from distrepro.config.run_config import validate_config
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.job.resolve import Job, build_job

# ---------------------------------------------------------------------------- engine side


class Stamps:
    """A RunObserver stamping wall and CPU time (``perf_counter``, ``process_time``) at every progress report: the
    in-process engine reports once per lockstep iteration, after all K workers finished it."""

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
    """The engine's job for one row: ``small_cnn`` on the synthetic set, K workers of ``bench-homogeneous-<K>``,
    evaluation pushed past the budget so that only the final one runs (outside the timed window)."""
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
    """One ``InProcessEngine`` run of ``job``; its (wall, process CPU) stamp at the end of every step."""
    stamps = Stamps()
    InProcessEngine().run(job, stamps)
    if len(stamps.t) != job.config.budget.steps:
        raise RuntimeError(f"expected {job.config.budget.steps} progress stamps, got {len(stamps.t)}")
    return stamps.t


# ---------------------------------------------------------------------------- quiet machine


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


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


# ---------------------------------------------------------------------------- pairs


def per_step_ms(stamps: list[tuple[float, float]], warmup: int) -> tuple[float, float]:
    """(wall, process CPU) milliseconds per step over the steps after the warm-up."""
    n = len(stamps) - warmup
    (w0, c0), (w1, c1) = stamps[warmup - 1], stamps[-1]
    return (w1 - w0) / n * 1e3, (c1 - c0) / n * 1e3


def _run_variant(variant: str, job: Job, method: str, args: argparse.Namespace) -> tuple[float, float]:
    total = job.config.budget.steps
    stamps = engine_run(job) if variant == "engine" else plain_run(job, method, total, args.period)
    return per_step_ms(stamps, args.warmup)


def measure(method: str, k: int, args: argparse.Namespace, image_size: int, bundles: dict[int, Any]) -> dict[str, Any]:
    """One table row: ``args.reps`` kept ABBA pairs of engine and plain runs (disturbed pairs dropped and repeated
    with ``--metric wall``), each metric summarised; ``bundles`` shares one synthetic dataset per image size."""
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
