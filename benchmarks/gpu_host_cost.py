"""Where a small CUDA step's host time goes: the launch path measured apart from the model, on a lent GPU.

Why: ``benchmarks/gpu_strong_scaling.py`` measured the authors' Transformer-base step on an H200 flat at about
66 ms from 12,480 down to 390 tokens per GPU, host-bound, where the emulator's host floor (CPU dispatch of the
same op structure at toy widths, ``eager_step.host_floor``: 11.8 µs a kernel op on that machine's CPU) predicts
22 ms. The step's ~1,750 kernels then cost ~37 µs each. This script separates the candidates, each measured in
one process, interleaved where two are compared:

* ``launch``: CPU µs per call of one trivial in-place op (``x.add_(1)``) on a CUDA tensor and on a CPU tensor,
  20,000 calls with no synchronisation: the price of the CUDA launch path (driver, and on a virtual machine its
  doorbell) on top of PyTorch's dispatch, with no model in it.
* ``step``: the model's step at 390 tokens with a synchronisation after every step (as the strong-scaling script
  times it) and with one only after 20 steps (the host running ahead: the host-bound rate), and the
  profiler's CPU-side totals of that step (self CPU ms by op, ``cudaLaunchKernel`` calls and time).
* ``paired``: the synchronised step at 390 tokens and the host floor in alternating rounds in one process, and
  their ratio (the lent machines' CPUs differ 2x from one machine to the next, so only the ratio travels).
* ``toy_widths``: the host floor as derived, the GPU recipe's step (autocast, GradScaler, Adam) at the same toy widths
  on CPU tensors and on CUDA tensors, in alternating rounds: the launch path apart from the recipe's own ops.
* ``cuda_profiler``: the synchronised step before and after one CUDA-activity profile in the same process.

What it found on lent H200s (BENCHMARKS.md, "Compute at a shrinking batch on a real GPU"): the launch call adds
1.5-4.5 µs an op, but the recipe's whole host path on CUDA tensors costs about twice what it costs on CPU tensors
(1.54-2.18x, ``benchmarks/data/h200/host_cost_toy.json``), which the Decent-DP profiles' ``overhead`` range spans.

    python benchmarks/gpu_host_cost.py --out "$OUT/host_cost.json"     # on the GPU machine
    python benchmarks/gpu_host_cost.py --out x.json --device cpu         # the path, here
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_strong_scaling as scaling

CALLS = 20_000


def launch_us(device: str, calls: int = CALLS, reps: int = 5) -> dict[str, float]:
    """CPU µs per ``add_`` call on ``device`` (median over ``reps``), and the wall µs per call."""
    x = torch.zeros(16, device=device)
    for _ in range(1000):
        x.add_(1)
    scaling._sync(device)
    cpu, wall = [], []
    for _ in range(reps):
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(calls):
            x.add_(1)
        cpu.append((time.process_time() - c0) / calls * 1e6)
        wall.append((time.perf_counter() - w0) / calls * 1e6)
        scaling._sync(device)
    return {"cpu_us": round(statistics.median(cpu), 2), "wall_us": round(statistics.median(wall), 2)}


def step_rates(device: str, tokens: int, steps: int = 20, reps: int = 3) -> dict[str, Any]:
    """Wall ms per step synchronised after each step and after ``steps`` steps, interleaved over ``reps``."""
    arm = scaling._model(device)
    batch = scaling._batch(tokens, device)
    for _ in range(5):
        scaling._step(*arm, *batch)
    scaling._sync(device)
    each, run_ahead = [], []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(steps):
            scaling._step(*arm, *batch)
            scaling._sync(device)
        each.append((time.perf_counter() - start) / steps * 1e3)
        start = time.perf_counter()
        for _ in range(steps):
            scaling._step(*arm, *batch)
        scaling._sync(device)
        run_ahead.append((time.perf_counter() - start) / steps * 1e3)
    return {
        "tokens": tokens,
        "synced_each_step_ms": round(statistics.median(each), 2),
        "synced_after_steps_ms": round(statistics.median(run_ahead), 2),
        "profile": _profile(arm, batch),
    }


def _profile(arm: tuple[Any, ...], batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, Any]:
    """The profiler's CPU-side totals of one step: top ops by self CPU time and the runtime's launch calls."""
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            scaling._step(*arm, *batch)
            scaling._sync(batch[0].device.type)
        self_us: collections.Counter[str] = collections.Counter()
        calls: collections.Counter[str] = collections.Counter()
        for e in prof.events():
            self_us[e.name] += e.self_cpu_time_total
            calls[e.name] += 1
    except Exception as error:  # a profiler that cannot run there must not lose the timings
        return {"error": f"{type(error).__name__}: {error}"}
    launch = {k: v for k, v in self_us.items() if "launch" in k.lower() or k.startswith("cuda")}
    return {
        "self_cpu_ms_total": round(sum(self_us.values()) / 1e3, 2),
        "top_self_cpu_ms": {k: [round(v / 1e3, 2), calls[k]] for k, v in self_us.most_common(15)},
        "runtime_calls": {k: [round(v / 1e3, 2), calls[k]] for k, v in sorted(launch.items())},
    }


def after_cuda_profiler(device: str, tokens: int = 390) -> dict[str, float]:
    """The synchronised step before and after one CUDA-activity profile in the same process: whether the profiler
    leaves the launch path slower (the strong-scaling script profiled each row before timing the next)."""
    from torch.profiler import ProfilerActivity, profile

    arm = scaling._model(device)
    batch = scaling._batch(tokens, device)
    scaling._time(arm, batch, 5)  # warm-up: allocator, cuDNN's plans
    before, _ = scaling._time(arm, batch, 20)
    if device == "cuda":
        with profile(activities=[ProfilerActivity.CUDA]):
            scaling._step(*arm, *batch)
            scaling._sync(device)
    after, _ = scaling._time(arm, batch, 20)
    return {"before_ms": round(statistics.median(before), 2), "after_ms": round(statistics.median(after), 2)}


def paired_with_floor(device: str, tokens: int = 390, rounds: int = 6, steps: int = 20) -> dict[str, Any]:
    """The synchronised step at ``tokens`` and the host floor (``eager_step.host_floor``) in alternating rounds:
    their ratio is what the model claims (a host-bound step costs the floor), free of the machine's drift."""
    import eager_step

    arm = scaling._model(device)
    batch = scaling._batch(tokens, device)
    scaling._time(arm, batch, 5)
    floors, walls = [], []
    for _ in range(rounds):
        floors.append(eager_step.host_floor(steps=steps, reps=1)["host_floor_ms"])
        walls.append(statistics.median(scaling._time(arm, batch, steps)[0]))
    ratios = [w / f for w, f in zip(walls, floors, strict=True)]
    return {
        "tokens": tokens,
        "floor_ms": [round(v, 2) for v in floors],
        "step_ms": [round(v, 2) for v in walls],
        "step_over_floor": [round(v, 3) for v in ratios],
        "median_step_over_floor": round(statistics.median(ratios), 3),
    }


def _toy_arm(device: str, vocab: int = 64) -> tuple[Any, ...]:
    """``eager_step.host_floor``'s toy-width model on ``device``, with the GPU recipe's loss scaler (disabled on the
    CPU, as ``gpu_strong_scaling._model``) and its 2 x 3 / 2 x 4 token batch."""
    import eager_step

    model, opt, loss_fn = eager_step._setup(vocab, d=16, heads=8, ffn=16)
    model.to(device)
    scaler = torch.amp.GradScaler(device, enabled=device == "cuda")
    g = torch.Generator().manual_seed(0)
    src, tgt = torch.randint(1, vocab, (2, 3), generator=g), torch.randint(1, vocab, (2, 4), generator=g)
    return model, opt, loss_fn, scaler, src.to(device), tgt.to(device), vocab


def _host_ms(arm: tuple[Any, ...], steps: int) -> dict[str, float]:
    """CPU and wall ms per toy step over ``steps`` steps run ahead (one synchronisation at the end)."""
    device = arm[4].device.type
    scaling._sync(device)
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
        scaling._step(*arm)  # the strong-scaling step at toy widths: its time is the host's
    scaling._sync(device)
    return {"cpu": (time.process_time() - c0) / steps * 1e3, "wall": (time.perf_counter() - w0) / steps * 1e3}


def toy_widths(device: str, rounds: int = 6, steps: int = 50) -> dict[str, Any]:
    """The host floor as derived (``eager_step.host_floor``: CPU tensors, no scaler), the GPU recipe's step at the
    same toy widths on CPU tensors, and on ``device`` tensors, in alternating rounds: what the launch path alone
    adds (CUDA over CPU tensors, one recipe) and what the recipe adds to the derivation (CPU tensors)."""
    import eager_step

    arms = {name: _toy_arm(name) for name in dict.fromkeys(("cpu", device))}
    for arm in arms.values():
        _host_ms(arm, 10)
    read: dict[str, list[float]] = {k: [] for k in ("floor_ms", "recipe_cpu_ms", "recipe_device_wall_ms", "cpu_ms")}
    for _ in range(rounds):
        read["floor_ms"].append(eager_step.host_floor(steps=steps, reps=1)["host_floor_ms"])
        read["recipe_cpu_ms"].append(_host_ms(arms["cpu"], steps)["cpu"])
        on_device = _host_ms(arms[device], steps)
        read["recipe_device_wall_ms"].append(on_device["wall"])
        read["cpu_ms"].append(on_device["cpu"])
    ratios = {
        "recipe_cpu_over_floor": [r / f for r, f in zip(read["recipe_cpu_ms"], read["floor_ms"], strict=True)],
        "device_over_recipe_cpu": [
            d / r for d, r in zip(read["recipe_device_wall_ms"], read["recipe_cpu_ms"], strict=True)
        ],
        "device_over_floor": [d / f for d, f in zip(read["recipe_device_wall_ms"], read["floor_ms"], strict=True)],
    }
    read["recipe_device_cpu_ms"] = read.pop("cpu_ms")
    out: dict[str, Any] = {k: [round(v, 2) for v in vs] for k, vs in read.items()}
    out |= {k: [round(v, 3) for v in vs] for k, vs in ratios.items()}
    out["medians"] = {k: round(statistics.median(vs), 3) for k, vs in ratios.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--paired-only", action="store_true", help="the launch cost, toy widths and paired floor only")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here (use --device cpu to check the path)")
    torch.set_num_threads(1)
    result: dict[str, Any] = {"environment": scaling._environment(args.device)}
    result["launch"] = {"cpu_tensor": launch_us("cpu")}
    if args.device == "cuda":
        result["launch"]["cuda_tensor"] = launch_us("cuda")
    print(json.dumps(result["launch"]), flush=True)
    result["toy_widths"] = toy_widths(args.device)
    print(json.dumps(result["toy_widths"]), flush=True)
    result["paired"] = paired_with_floor(args.device)
    print(json.dumps(result["paired"]), flush=True)
    if args.paired_only:
        scaling.write_json(args.out, result)
        return 0
    result["steps"] = [step_rates(args.device, t) for t in (390, 3120)]
    print(json.dumps(result["steps"]), flush=True)
    result["cuda_profiler"] = after_cuda_profiler(args.device)
    print(json.dumps(result["cuda_profiler"]), flush=True)
    scaling.write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
