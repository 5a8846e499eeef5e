"""Batched replicas: the in-process engine with ``batched_replicas`` off (one worker's forward/backward after another)
against on (the workers one event released, as one ``vmap``-ed call: :mod:`distrepro.engine.inprocess.batching`).

Workloads are the suite's own arm configs, shortened to ``--steps`` steps with one (final) evaluation:

* ``small_cnn`` at K = 8, 16, 64: A²CiD²'s proxy workload (``methods/acid/configs/gossip-n{K}.yaml``: small_cnn with
  8 hidden units, 8 px synthetic images, 16 per worker), trained by ``ar_sgd`` (lockstep: every step's K workers are
  released by one event, so the whole step batches) and, with ``--async-arms``, by the arm's own ``acid``
  (asynchronous: each worker is released by its own event, so almost nothing batches; measured to show it);
* ``cnn1d`` at the mid scale: Decent-DP's ``accum.mid.yaml`` (16 workers, AccumAdam, 32 signals each) and, with
  ``--async-arms``, A²CiD²'s ``train16.mid.yaml``.

Each repetition runs the two variants in ABBA order (off, on, on, off) and pairs adjacent runs, so slow drift of a
shared machine affects both. A run's time is the training window: from the first ``on_progress`` (the end of the
first iteration) to the last, so building the job, the replicas and the final evaluation are outside it; CPU time
(``time.process_time``, one torch thread as the reproduce cells use) is reported beside wall time, with the load
average before and after. Per workload the table gives ms per worker-step of each variant, the off/on ratio (median
over pairs, range), the share of forward/backward calls that ran batched, the forward/backward alone (the workload's
K replicas on their first batches, one after another against :func:`forward_backward_stacked`, CPU time, ABBA), the
largest difference between the two variants' final parameters and buffers, and whether the two batched runs of a
repetition were identical bit for bit.

Run ``python benchmarks/batched_replicas.py --help``; the figures and the command are in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from inprocess_timing import Stamps  # noqa: E402

from distrepro.config.overrides import parse_override  # noqa: E402
from distrepro.config.run_config import load_config  # noqa: E402
from distrepro.engine.inprocess.run import InProcessEngine  # noqa: E402
from distrepro.job.resolve import build_job  # noqa: E402
from distrepro.training.replica_batch import forward_backward_stacked  # noqa: E402

#: label -> (config, overrides); the lockstep ones first
LOCKSTEP: dict[str, tuple[str, list[str]]] = {
    **{
        f"small_cnn K={k} ar_sgd": (f"methods/acid/configs/gossip-n{k}.yaml", ["method=ar_sgd", "method_params={}"])
        for k in (8, 16, 64)
    },
    "cnn1d mid K=16 decentdp (AccumAdam)": ("methods/decentdp/configs/accum.mid.yaml", []),
}
ASYNC: dict[str, tuple[str, list[str]]] = {
    **{f"small_cnn K={k} acid": (f"methods/acid/configs/gossip-n{k}.yaml", []) for k in (8, 64)},
    "cnn1d mid K=16 acid": ("methods/acid/configs/train16.mid.yaml", []),
}


def run_once(path: str, overrides: list[str], batched: bool, steps: int) -> dict[str, Any]:
    """One run; its training window's wall and CPU seconds, its worker-steps, batched share and final state."""
    texts = [*overrides, f"batched_replicas={str(batched).lower()}", f"budget={{steps: {steps}}}", "eval={times: 1}"]
    texts.append("torch_threads=1")
    cfg = load_config(REPO / path, [parse_override(t) for t in texts])
    job = build_job(cfg, 0)
    harness = InProcessEngine().harness(job, stamps := Stamps())
    result = harness.run()
    assert result is not None
    (w0, c0), (w1, c1) = stamps.t[0], stamps.t[-1]
    batcher = harness.transport.batcher  # type: ignore[attr-defined]
    grads = sum(slot.worker.gradients for slot in harness.slots)
    calls = (batcher.batched_calls, grads - batcher.batched_calls) if batcher is not None else (0, grads)
    first = job.world_size if job.method.cls.synchronous else 1  # gradients before the window's first stamp
    state = [torch.cat([t.detach().double().reshape(-1) for t in m.state_dict().values()]) for m in result.models]
    return {
        "wall_s": w1 - w0,
        "cpu_s": c1 - c0,
        "worker_steps": max(grads - first, 1),
        "batched_calls": calls[0],
        "unbatched_calls": calls[1],
        "state": state,
        "k": job.world_size,
    }


def fb_alone(path: str, overrides: list[str], reps: int, iters: int = 8) -> list[float]:
    """The forward/backward alone: the workload's K replicas on their first batches, one after another vs
    :func:`forward_backward_stacked`, CPU time, ABBA; off/on ratio per pair."""
    cfg = load_config(REPO / path, [parse_override(t) for t in [*overrides, "torch_threads=1"]])
    job = build_job(cfg, 0)
    base = job.make_model()
    models = [copy.deepcopy(base) for _ in range(job.world_size)]
    assert job.bundle.train_tensors is not None, "the suite's synthetic and MNIST-1D sets are held in memory"
    x, y = job.bundle.train_tensors
    b = job.batch_sizes[0]
    xs, ys = [x[i * b : (i + 1) * b] for i in range(len(models))], [y[i * b : (i + 1) * b] for i in range(len(models))]

    def one_by_one() -> None:
        for m, xi, yi in zip(models, xs, ys, strict=True):
            F.cross_entropy(m(xi), yi).backward()

    def timed(batched: bool) -> float:
        start = time.process_time()
        for _ in range(iters):
            for m in models:
                m.zero_grad(set_to_none=True)
            forward_backward_stacked(models, xs, ys) if batched else one_by_one()
        return time.process_time() - start

    timed(True), timed(False)  # warm-up
    ratios = []
    for _ in range(reps):
        off1, on1, on2, off2 = timed(False), timed(True), timed(True), timed(False)
        ratios += [off1 / on1, off2 / on2]
    return ratios


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def _identical(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def measure(label: str, path: str, overrides: list[str], steps: int, reps: int) -> dict[str, Any]:
    """ABBA repetitions of one workload: ratios per pair, batched share, agreement and determinism."""
    pairs: list[dict[str, float]] = []
    runs: list[dict[str, Any]] = []
    same, diff = True, 0.0
    for _ in range(reps):
        off1 = run_once(path, overrides, False, steps)
        on1 = run_once(path, overrides, True, steps)
        on2 = run_once(path, overrides, True, steps)
        off2 = run_once(path, overrides, False, steps)
        same = same and _identical(on1["state"], on2["state"]) and _identical(off1["state"], off2["state"])
        diff = max(diff, _max_diff(off1["state"], on1["state"]))
        for off, on in ((off1, on1), (off2, on2)):
            pairs.append({m: off[m] / on[m] for m in ("cpu_s", "wall_s")})
            runs.extend({k: v for k, v in r.items() if k != "state"} | {"batched": b} for r, b in ((off, 0), (on, 1)))
        print(f"  {label}: pair CPU ratios {[round(p['cpu_s'], 2) for p in pairs]}", file=sys.stderr, flush=True)

    def per_step_ms(batched: int, metric: str) -> float:
        return statistics.median(1e3 * r[metric] / r["worker_steps"] for r in runs if r["batched"] == batched)

    alone = fb_alone(path, overrides, reps)
    on_runs = [r for r in runs if r["batched"]]
    share = sum(r["batched_calls"] for r in on_runs) / max(
        sum(r["batched_calls"] + r["unbatched_calls"] for r in on_runs), 1
    )
    return {
        "workload": label,
        "config": path,
        "overrides": overrides,
        "k": runs[0]["k"],
        "off_cpu_ms": per_step_ms(0, "cpu_s"),
        "on_cpu_ms": per_step_ms(1, "cpu_s"),
        "off_wall_ms": per_step_ms(0, "wall_s"),
        "on_wall_ms": per_step_ms(1, "wall_s"),
        "cpu_ratio": [statistics.median(p["cpu_s"] for p in pairs), *_range(p["cpu_s"] for p in pairs)],
        "wall_ratio": [statistics.median(p["wall_s"] for p in pairs), *_range(p["wall_s"] for p in pairs)],
        "batched_share": share,
        "fb_alone_ratio": [statistics.median(alone), *_range(alone)],
        "max_abs_diff": diff,
        "run_to_run_identical": same,
        "runs": runs,
    }


def _range(values: Any) -> tuple[float, float]:
    v = list(values)
    return min(v), max(v)


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| workload | K | CPU ms/worker-step off → on | speed-up CPU, median (range) | wall ms off → on "
        "| speed-up wall | batched | forward/backward alone: speed-up CPU | final max abs diff | on twice: identical |",
        "|---|---:|---|---|---|---|---:|---|---:|---|",
    ]
    for r in rows:
        c, w, a = r["cpu_ratio"], r["wall_ratio"], r["fb_alone_ratio"]
        out.append(
            f"| {r['workload']} | {r['k']} | {r['off_cpu_ms']:.2f} → {r['on_cpu_ms']:.2f} "
            f"| **{c[0]:.2f}×** ({c[1]:.2f} … {c[2]:.2f}) | {r['off_wall_ms']:.2f} → {r['on_wall_ms']:.2f} "
            f"| {w[0]:.2f}× ({w[1]:.2f} … {w[2]:.2f}) | {100 * r['batched_share']:.0f} % "
            f"| {a[0]:.2f}× ({a[1]:.2f} … {a[2]:.2f}) | {r['max_abs_diff']:.1e} "
            f"| {'yes' if r['run_to_run_identical'] else 'NO'} |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=24, help="steps per run (the window is all but the first)")
    parser.add_argument("--reps", type=int, default=2, help="ABBA repetitions per workload (two pairs each)")
    parser.add_argument("--async-arms", action="store_true", help="also the asynchronous arms (A²CiD²'s own)")
    parser.add_argument("--only", nargs="*", default=None, help="workload labels containing any of these words")
    args = parser.parse_args()
    torch.set_num_threads(1)
    workloads = {**LOCKSTEP, **(ASYNC if args.async_arms else {})}
    if args.only:
        workloads = {k: v for k, v in workloads.items() if any(w in k for w in args.only)}
    started, load0, cpu0 = time.perf_counter(), os.getloadavg(), time.process_time()
    rows = [measure(label, path, ov, args.steps, args.reps) for label, (path, ov) in workloads.items()]
    load1 = os.getloadavg()
    meta = {
        "utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "load_before": load0,
        "load_after": load1,
        "command_wall_s": time.perf_counter() - started,
        "command_cpu_s": time.process_time() - cpu0,
        "args": vars(args),
    }
    print(table(rows))
    print(
        f"\n{meta['utc']}, torch {meta['torch']}, {meta['cpus']} CPUs, load average {load0[0]:.1f} before and "
        f"{load1[0]:.1f} after, {meta['command_wall_s']:.0f} s wall / {meta['command_cpu_s']:.0f} s CPU for the command"
    )
    out = REPO / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    (out / f"batched_replicas_{stamp}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
