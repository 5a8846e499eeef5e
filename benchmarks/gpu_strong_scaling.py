"""Compute at a shrinking per-GPU batch, predicted here and then measured on a lent GPU: a held-out check.

Why: Decent-DP's Fig. 6 splits a fixed 25K-token batch over 8-64 GPUs, so each GPU's step runs at 390-3,125
tokens, and the emulator prices that step as ``max(t_floor, t_fixed + b / peak)``
(:class:`distrepro.timing.compute.ComputeModel`) with the three figures derived, never fitted, by
``benchmarks/eager_step.py``: the host's dispatch floor (CPU time of the authors' op structure at toy widths) and
the datasheet roofline of every op at the real widths. Whether that derivation is right for the right reasons can
only be seen on a GPU whose step it never saw. This script does the two halves apart:

* ``predict`` (here, on a CPU, before any GPU step is timed): the roofline figures of the authors' Transformer-base
  on the target GPU from its datasheet (``eager_step.GPUS``), and what DDP's reducer adds
  (:func:`distrepro.timing.framework.reducer_seconds`, PyTorch's reducer), written to a JSON file that is
  committed before the measurement.
* ``measure`` (on the GPU): first the host floor on that machine's CPU, exactly as ``eager_step.py`` derives it
  (nothing on the GPU yet), which completes the prediction; then the real step (CUDA, float16 autocast,
  ``GradScaler``, Adam: the authors' recipe) at 25,000/p tokens for p = 1 ... 64, with and without DDP (one rank,
  NCCL, its default 25 MiB buckets), interleaved in pairs, and one profiled step of each for the kernels it
  launches. Written: the prediction, the measurement and the signed error of each (+ = predicted too fast).

    python benchmarks/gpu_strong_scaling.py predict --gpu h200 --out benchmarks/data/h200/strong_scaling_prediction.json
    python benchmarks/gpu_strong_scaling.py measure --prediction benchmarks/data/h200/strong_scaling_prediction.json \
        --out "$OUT/strong_scaling.json"                      # on the GPU machine
    python benchmarks/gpu_strong_scaling.py measure --prediction ... --out x.json --device cpu --quick  # the path, here
    python benchmarks/gpu_strong_scaling.py summarize benchmarks/data/h200/strong_scaling_measured_*.json

Sentences are random token ids, 30 source and 31 target tokens (the roofline's shape), ``tokens // 30`` of them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import eager_step

#: the Fig. 6 global batch and the GPU counts whose per-GPU share is timed (1 and 2 give the slope's long end)
GLOBAL_TOKENS = 25_000
GPU_COUNTS = (1, 2, 4, 8, 16, 32, 64)
LENGTH = 30
VOCAB, D, HEADS, FFN = 37_120, 512, 8, 2048


def tokens_per_gpu(p: int) -> int:
    """Tokens one GPU trains when ``p`` GPUs split the global batch, rounded down to whole sentences."""
    return (GLOBAL_TOKENS // p) // LENGTH * LENGTH


def predict(gpu: str) -> dict[str, Any]:
    """The roofline figures for ``gpu`` and the DDP reducer's cost, from datasheets and counted ops only."""
    from distrepro.timing.framework import REDUCERS, reducer_seconds

    figures = eager_step.roofline()
    mine = figures["gpus"][gpu]
    model, _, _ = eager_step._setup(VOCAB, D, HEADS, FFN)
    tensors = sum(1 for p in model.parameters() if p.requires_grad)
    params = sum(p.numel() for p in model.parameters())
    bandwidth = eager_step.GPUS[gpu][1]
    buckets = -(-4 * params // (25 * 2**20))
    ddp_s = reducer_seconds(REDUCERS["torch"], tensors, buckets, 4.0 * params, bandwidth)
    return {
        "gpu": gpu,
        "datasheet": {"fp16_tensor_flops": eager_step.GPUS[gpu][0], "memory_bytes_per_s": bandwidth},
        "roofline": {k: figures[k] for k in ("kernels_fwd_bwd", "bytes_per_token", "flops_per_token", "params")},
        "per_token_us": mine["per_token_us"],
        "t_fixed_ms": mine["t_fixed_ms"],
        "optimizer_ms": mine["optimizer_ms"],
        "ddp_reducer_ms": round(ddp_s * 1e3, 3),
        "gradient_tensors": tensors,
        "buckets": buckets,
        "rule": "step = max(host_floor + optimizer, t_fixed + tokens * per_token); DDP adds ddp_reducer_ms",
        "torch": torch.__version__,
        "written": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def _model(device: str) -> tuple[torch.nn.Module, Any, Any, Any]:
    """The roofline's model, optimizer and loss (``eager_step._setup``), on ``device``, with a loss scaler."""
    model, opt, loss_fn = eager_step._setup(VOCAB, D, HEADS, FFN)
    model.to(device)  # in place: the optimizer keeps the moved parameters
    scaler = torch.amp.GradScaler(device, enabled=device == "cuda")
    return model, opt, loss_fn, scaler


def _batch(tokens: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(tokens)
    n = max(1, tokens // LENGTH)
    src = torch.randint(1, VOCAB, (n, LENGTH), generator=g)
    tgt = torch.randint(1, VOCAB, (n, LENGTH + 1), generator=g)
    return src.to(device), tgt.to(device)


def _step(
    model: Any, opt: Any, loss_fn: Any, scaler: Any, src: torch.Tensor, tgt: torch.Tensor, vocab: int = VOCAB
) -> None:
    """One step of the authors' recipe: autocast (FP16 on CUDA, BF16 on the CPU), the loss scaler, Adam."""
    device = src.device.type
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device, dtype=torch.float16 if device == "cuda" else torch.bfloat16):
        loss = loss_fn(model(src, tgt[:, :-1]).reshape(-1, vocab), tgt[:, 1:].reshape(-1))
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _time(arm: tuple[Any, ...], batch: tuple[torch.Tensor, torch.Tensor], steps: int) -> tuple[list[float], float]:
    """Wall ms of each of ``steps`` steps (synchronised), and the host's CPU ms per step over them."""
    device = batch[0].device.type
    walls = []
    cpu0 = time.process_time()
    for _ in range(steps):
        _sync(device)
        start = time.perf_counter()
        _step(*arm, *batch)
        _sync(device)
        walls.append((time.perf_counter() - start) * 1e3)
    return walls, (time.process_time() - cpu0) / steps * 1e3


def _kernels(arm: tuple[Any, ...], batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, int]:
    """GPU kernels one step launches (all, and NCCL's), from the profiler."""
    from torch.profiler import ProfilerActivity, profile

    if batch[0].device.type != "cuda":
        return {}
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            _step(*arm, *batch)
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    except Exception as error:  # a profiler that cannot run there must not lose the timings
        return {"error": f"{type(error).__name__}: {error}"}
    return {"kernels": len(names), "nccl_kernels": sum("nccl" in n.lower() for n in names)}


def _row(
    p: int,
    tokens: int,
    arms: dict[str, tuple[Any, ...]],
    prediction: dict[str, Any],
    t_floor: float,
    device: str,
    warmup: int,
    steps: int,
) -> dict[str, Any]:
    """One per-GPU batch: both arms warmed up, then timed in interleaved rounds (plain, DDP, plain, DDP), against
    the prediction."""
    batch = _batch(tokens, device)
    for arm in arms.values():
        _time(arm, batch, warmup)
    walls: dict[str, list[float]] = {name: [] for name in arms}
    cpu: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(2):
        for name, arm in arms.items():
            w, c = _time(arm, batch, steps)
            walls[name] += w
            cpu[name].append(c)
    predicted = max(t_floor, prediction["t_fixed_ms"] + tokens * prediction["per_token_us"] / 1e3)
    predicted_ddp = predicted + prediction["ddp_reducer_ms"]
    measured, measured_ddp = statistics.median(walls["plain"]), statistics.median(walls["ddp"])
    return {
        "gpus": p,
        "tokens": tokens,
        "measured_ms": round(measured, 2),
        "measured_ms_spread": [round(min(walls["plain"]), 2), round(max(walls["plain"]), 2)],
        "predicted_ms": round(predicted, 2),
        "bound": "host floor" if t_floor >= predicted else "roofline",
        "error": round(measured / predicted - 1, 4),
        "ddp_measured_ms": round(measured_ddp, 2),
        "ddp_predicted_ms": round(predicted_ddp, 2),
        "ddp_error": round(measured_ddp / predicted_ddp - 1, 4),
        "ddp_minus_plain_ms": round(measured_ddp - measured, 2),
        "host_cpu_ms": {k: round(statistics.median(v), 2) for k, v in cpu.items()},
    }


def _environment(device: str) -> dict[str, Any]:
    if device != "cuda":
        return {"device": device, "torch": torch.__version__}
    return {
        "name": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
    }


def measure(prediction: dict[str, Any], device: str, quick: bool, warmup: int, steps: int) -> dict[str, Any]:
    """The host floor on this machine's CPU first (it completes the prediction), then every per-GPU batch."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    floor = eager_step.host_floor(steps=10 if quick else 50, reps=2 if quick else 5)
    t_floor = floor["host_floor_ms"] + prediction["optimizer_ms"]
    store = Path(tempfile.mkdtemp()) / "rendezvous"
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"file://{store}", rank=0, world_size=1)
    wrapped, *rest = _model(device)
    arms = {"plain": _model(device), "ddp": (DistributedDataParallel(wrapped), *rest)}
    rows = []
    for p in GPU_COUNTS[-3:] if quick else GPU_COUNTS:
        tokens = max(LENGTH, tokens_per_gpu(p) // 50) if quick else tokens_per_gpu(p)
        rows.append(_row(p, tokens, arms, prediction, t_floor, device, warmup, steps))
        print(json.dumps(rows[-1]), flush=True)
    for row in rows:  # after every timing: a process the profiler has run in launches slower from then on
        batch = _batch(row["tokens"], device)
        row["profiled"] = {name: _kernels(arm, batch) for name, arm in arms.items()}
    dist.destroy_process_group()
    out: dict[str, Any] = {"prediction": prediction, "host": floor, "environment": _environment(device)}
    out |= {"t_floor_ms": round(t_floor, 2), "rows": rows}
    big = [r for r in rows if r["tokens"] >= 3000]
    if len(big) >= 2:  # the per-token slope between the largest and smallest batches above the floor's reach
        lo, hi = big[-1], big[0]
        out["measured_per_token_us"] = round(
            (hi["measured_ms"] - lo["measured_ms"]) / (hi["tokens"] - lo["tokens"]) * 1e3, 3
        )
    return out


def summarize(runs: list[dict[str, Any]]) -> str:
    """A markdown table of measured runs against their predictions: per GPU count the median over runs (and the
    range) of the measured step, of the signed error (each run judged with its own machine's host floor) and of
    what DDP adds. Why medians of runs: the lent machines' CPUs differ up to 2x from one to the next."""

    def span(values: list[float], fmt: str) -> str:
        return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)} .. {format(max(values), fmt)})"

    floors = [r["t_floor_ms"] for r in runs]
    lines = [
        f"{len(runs)} runs; host floor + optimizer as measured on each machine: "
        + ", ".join(f"{v:.1f}" for v in floors)
        + " ms",
        "",
        "| GPUs | tokens a GPU | roofline predicted ms | measured ms | error | bound predicted | DDP adds ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, first in enumerate(runs[0]["rows"]):
        rows = [r["rows"][i] for r in runs]
        roofline = runs[0]["prediction"]["t_fixed_ms"] + first["tokens"] * runs[0]["prediction"]["per_token_us"] / 1e3
        bounds = sorted({r["bound"] for r in rows})
        cells = [
            f"{first['gpus']}",
            f"{first['tokens']:,}",
            f"{roofline:.1f}",
            span([r["measured_ms"] for r in rows], ".1f"),
            span([r["error"] * 100 for r in rows], "+.0f") + " %",
            " / ".join(bounds),
            span([r["ddp_minus_plain_ms"] for r in rows], ".1f"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("predict", help="the roofline prediction for a GPU (here, on a CPU)")
    p.add_argument("--gpu", default="h200", choices=sorted(eager_step.GPUS))
    p.add_argument("--out", type=Path, required=True)
    m = sub.add_parser("measure", help="the host floor and the real steps (on the GPU)")
    m.add_argument("--prediction", type=Path, required=True)
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    m.add_argument("--quick", action="store_true", help="tiny batches and few steps: the path, not the figures")
    m.add_argument("--warmup", type=int, default=5)
    m.add_argument("--steps", type=int, default=10, help="timed steps per arm per round (two rounds)")
    t = sub.add_parser("summarize", help="a markdown table of measured runs against their predictions")
    t.add_argument("runs", type=Path, nargs="+", help="JSON files written by measure")
    args = parser.parse_args(argv)
    if args.command == "summarize":
        print(summarize([json.loads(path.read_text()) for path in args.runs]))
        return 0
    if args.command == "predict":
        result = predict(args.gpu)
    else:
        if args.device == "cuda" and not torch.cuda.is_available():
            parser.error("--device cuda: no CUDA device here (use --device cpu --quick to check the path)")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        result = measure(json.loads(args.prediction.read_text()), args.device, args.quick, args.warmup, args.steps)
    write_json(args.out, result)
    return 0


def write_json(path: Path, result: dict[str, Any]) -> None:
    """``result`` as indented JSON at ``path`` (its folder made), and a line saying so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
