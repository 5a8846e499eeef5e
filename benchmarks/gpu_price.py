"""Price each paper's ``--scale gpu`` reproduction before anything trains.

Why: a GPU recipe must fit one 80 GB GPU in about an hour per paper, and a GPU was not at hand when the recipes
were written, so their cost is computed, not timed. For every arm ``distrepro reproduce <paper> --scale gpu``
would run (the arms of the claims that move to the gpu scale), the arm's config is planned exactly as the
reproduction loads it (``distrepro plan``, with the arm's method params): the emulated time of one seed (the
plan's ``time``), and the host's arithmetic (the plan's ``training``: samples, the trained model's FLOPs,
evaluations, every seed). Wall time on a GPU is then estimated two ways, both printed:

* **compute**: FLOPs / a sustained rate. The rates are measured training throughputs of ResNet-50 at 224 px
  in Lambda's GPU benchmark (github.com/lambdal/deeplearning-benchmark @ d743970,
  ``pytorch/csv_v1_v2/pytorch-train-throughput-fp32.csv``, "fp32" = TF32 convolutions in NGC PyTorch: 1x H100
  80GB SXM5 1,895 img/s, 1x H100 80GB PCIe 1,248, A100 80GB SXM4 1,066) times ResNet-50's 24.30 GFLOP per
  trained sample (``hardware_profiles/workloads.yaml``). Lambda trains at large batches; the recipes' per-worker
  batches are 64-128 images of 32x32, so the table also gives the time at half the rate (our allowance [E]).
* **launch floor**: eager PyTorch issues one kernel per aten op, so a forward/backward/optimizer step of a small
  batch costs at least (ops per step) x (seconds per op) of host time, whatever the GPU. The ops of one step of
  the trained model are counted here (``TorchDispatchMode`` on the CPU: forward, cross-entropy, backward,
  ``optimizer.step`` with the multi-tensor kernels CUDA gets by default); ``--op-us`` (default 10 µs [E]) is the
  host cost of one op. Calls: one forward/backward per rank with data per step (C-ADP: its local micro-batch
  steps per round).

``--augment-items N`` also times the CIFAR-10 augmentation path (the loader's per-image random crop + flip +
normalise, on the CPU, one thread) on a generated folder in the real format: the images/s the data path can feed.

    .venv/bin/python benchmarks/gpu_price.py --augment-items 4000
"""

from __future__ import annotations

import argparse
import json
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from distrepro.claims.papers import arm_config_path, arms_at_scale, find_paper
from distrepro.claims.schema import at_scale, claim_arms
from distrepro.orchestration.plan import build_plan
from distrepro.reproduction.selection import param_overrides as _param_overrides

PAPERS = ("qsr", "decentdp", "acid", "cadp", "chao")
RESNET50_FLOP = 24.30e9  # hardware_profiles/workloads.yaml, resnet50_in1k_224
#: img/s, Lambda deeplearning-benchmark @ d743970, pytorch/csv_v1_v2/pytorch-train-throughput-fp32.csv, ResNet-50
RATES = {"H100 SXM5": 1895 * RESNET50_FLOP, "H100 PCIe": 1248 * RESNET50_FLOP, "A100 80GB SXM4": 1066 * RESNET50_FLOP}
OUT = Path(__file__).resolve().parent / "out"


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.n += 1
        return func(*args, **(kwargs or {}))


def ops_per_step(model_name: str, optimizer: str) -> int:
    """aten ops of one worker step of ``model_name`` on CIFAR-shaped inputs (≈ kernel launches on a GPU)."""
    from distrepro.training.models import build_model

    model = build_model(model_name, 10, (3, 32, 32))
    params = list(model.parameters())
    # foreach: the multi-tensor kernels torch picks by default for CUDA tensors (not for CPU ones)
    if optimizer == "adam":
        opt: torch.optim.Optimizer = torch.optim.Adam(params, foreach=True)
    else:
        opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=True)
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()  # optimizer state exists: the step counted below is a steady-state one
    count = _Ops()
    with count:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return count.n


def price_paper(paper: str) -> dict[str, Any]:
    info = find_paper(paper)
    assert info.spec is not None and info.path is not None
    arms = info.spec.setup.arms
    moved = at_scale(info.spec, "gpu", arms_at_scale(info, "gpu"))  # as `distrepro reproduce --scale gpu` picks them
    wanted = {a for c in moved.claims if c.scale == "gpu" for a in claim_arms(c)}
    rows = []
    for name in (a for a in arms if a in wanted and not arms[a].optional):
        arm = arms[name]
        path = arm_config_path(info.path, name, arm.config, "gpu", None)
        sets = [f"paper={paper}", "scale=gpu", f"name={arm.campaign or name}", f"method={arm.method}"]
        plan = build_plan(path, [*sets, *_param_overrides(arm.params)])
        t, alloc = plan["training"], plan["allocation"]
        mplan = plan["method_plan"] if isinstance(plan["method_plan"], dict) else {}
        if "local_steps_per_round" in mplan:  # C-ADP: a step is a round of local micro-batch steps on every rank
            calls = sum(mplan["local_steps_per_round"]) * mplan["rounds_in_run"]
        else:  # one forward/backward per rank with data per step (asynchronous: steps = gradients / world size)
            calls = plan["lr"]["total_steps"] * sum(1 for b in alloc["batch_sizes"] if b)
        optimizer = plan["config"]["method_params"].get("optimizer") or {}
        rows.append(
            {
                "arm": name,
                "config": path.name,
                "steps": plan["lr"]["total_steps"] if isinstance(plan["lr"], dict) else None,
                "epochs_per_seed": t["epochs_per_seed"],
                "seeds": t["seeds"],
                "emulated_s_per_seed": plan["time"]["total_s"],
                "flops_all_seeds": t["flops_all_seeds"],
                "calls_all_seeds": calls * t["seeds"],
                "optimizer": "adam" if "adam" in str(optimizer.get("name", "")) else "sgd",
            }
        )
    return {"paper": paper, "arms": rows}


def augment_rate(items: int) -> dict[str, float]:
    """Images/s of the CIFAR-10 loader's augmentation path, one thread, on a generated folder."""
    from distrepro.data.loading import build_dataset
    from distrepro.plugins.registry import get_dataset

    root = Path(tempfile.mkdtemp())
    folder = root / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in [*(f"data_batch_{b}" for b in range(1, 6)), "test_batch"]:
        entry = {"data": rng.integers(0, 256, size=(400, 3072), dtype=np.uint8), "labels": [i % 10 for i in range(400)]}
        (folder / name).write_bytes(pickle.dumps(entry))
    meta = {"label_names": [f"c{i}" for i in range(10)]}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta))
    bundle = build_dataset(get_dataset("cifar10"), {"augment": True, "verify_checksums": False}, root, 0, None)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        best = 0.0
        for _ in range(3):
            wall, cpu = time.perf_counter(), time.process_time()
            for i in range(items):
                bundle.train[i % len(bundle.train)]
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            best = max(best, items / cpu)
        return {"items_per_cpu_s": best, "items": float(items)}
    finally:
        torch.set_num_threads(threads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--papers", default=",".join(PAPERS))
    ap.add_argument("--op-us", type=float, default=10.0, help="host microseconds per eager op (kernel launch)")
    ap.add_argument("--augment-items", type=int, default=0, help="also time the augmentation path on this many images")
    args = ap.parse_args()
    ops = {opt: ops_per_step("resnet18_cifar", opt) for opt in ("sgd", "adam")}
    papers = [price_paper(p) for p in args.papers.split(",")]
    print(f"aten ops per worker step (ResNet-18 CIFAR, fwd + loss + bwd + step): {ops}")
    print("\n| paper | arm | config | steps | epochs/seed | seeds | emulated s/seed (plan) | FLOP, all seeds |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for p in papers:
        for r in p["arms"]:
            emu = r["emulated_s_per_seed"]
            emu_s = f"{emu:.1f}" if isinstance(emu, float) else str(emu)
            print(
                f"| {p['paper']} | {r['arm']} | {r['config']} | {r['steps']} | {r['epochs_per_seed']:.2f} "
                f"| {r['seeds']} | {emu_s} | {r['flops_all_seeds']:.3g} |"
            )
    heads = " | ".join(f"h @ {k} (half)" for k in RATES)
    print(f"\n| paper | arms x seeds | epochs | FLOP | {heads} | launch floor h |")
    print("|---|---:|---:|---:|" + "---:|" * (len(RATES) + 1))
    for p in papers:
        flops = sum(r["flops_all_seeds"] for r in p["arms"])
        epochs = sum(r["epochs_per_seed"] * r["seeds"] for r in p["arms"])
        floor = sum(r["calls_all_seeds"] * ops[r["optimizer"]] for r in p["arms"]) * args.op_us * 1e-6 / 3600
        cells = " | ".join(f"{flops / v / 3600:.2f} ({2 * flops / v / 3600:.2f})" for v in RATES.values())
        runs = f"{len(p['arms'])} x {sum(r['seeds'] for r in p['arms']) // max(len(p['arms']), 1)}"
        p |= {"flops": flops, "epochs": epochs, "launch_floor_h": floor}
        print(f"| {p['paper']} | {runs} | {epochs:.0f} | {flops:.3g} | {cells} | {floor:.2f} |")
    result: dict[str, Any] = {"ops_per_step": ops, "op_us": args.op_us, "rates_flop_s": RATES, "papers": papers}
    if args.augment_items:
        result["augment"] = augment_rate(args.augment_items)
        print(f"\naugmentation path, one thread: {result['augment']['items_per_cpu_s']:.0f} images per CPU-second")
    OUT.mkdir(exist_ok=True)
    (OUT / "gpu_price.json").write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
