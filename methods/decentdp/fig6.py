"""Decent-DP's Fig. 6 (strong scaling of the per-iteration time) as a *prediction* of the emulator.

Each of the 36 cells (three clusters x three GPU counts x four methods) runs a few real steps of a tiny proxy
model on the in-process engine, with time and bytes charged as Transformer-base (``emulated_workload:
transformer_base_wmt14_195tok``: one sample = 25,000/128 tokens, so the fixed 25K-token global batch is 128
samples split evenly) on the profile ``<setup>-<gpus>`` built from public specifications
(``hardware_profiles/``), never fitted to the figure. The per-iteration time is the emulated time between the
evaluation after step 4 and the one after the last step, divided by the steps between them: the first steps are
left out as the paper's timings leave out warm-up. Two are not enough: Decent-DP's blocking first exchange shows
in the clock's reading of step 3 (the 16-A40 AER cell reads 186 ms for step 3, then 128 and 79 ms alternately
for ever after), and a window from step 2 overstated that cell by a quarter. The window is a whole number of the
method's periods (at least 4 steps): rounds of a time-varying topology cost differently (an intra-node round of
the one-peer exponential graph is cheap, an inter-node one is not), so a window that cut a period short would
weigh them wrongly. Periods: 1 (AllReduce), 2 (AER), log2 n (the one-peer exponential graph of Decent (Exp) and
SGP (Exp)).

``python -m`` is not needed: ``distrepro reproduce decentdp`` calls :func:`build` after the arms (the plugin's
``products`` hook) with the harness's :class:`distrepro.api.ReportContext`, which trains each cell.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any

from distrepro import api

SETUPS: dict[str, tuple[int, ...]] = {"t4-ib": (16, 32, 64), "a100-ib": (8, 16, 32), "a40-25gbe": (8, 16, 32)}
LABELS = {"t4-ib": "8xT4/node, 100 Gbps IB", "a100-ib": "4xA100/node, 100 Gbps IB", "a40-25gbe": "4xA40/node, 25 GbE"}
#: method key -> (plugin, method_params); optimizers as the Transformer recipes (README)
METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "allreduce": (
        "ar_sgd",
        {"weighting": "equal", "optimizer": {"name": "adam", "lr": 7e-4, "betas": [0.9, 0.98], "eps": 1e-9}},
    ),
    "sgp-exp": ("sgp", {}),
    "decent-exp": ("decentdp", {"topology": "one-peer-exp"}),
    "decent-aer": ("decentdp", {"topology": "alternating-exp-ring"}),
}
GLOBAL_BATCH = 128  # samples of 25,000/128 tokens
WORKLOAD = "transformer_base_wmt14_195tok"
WARMUP = 4  # steps left out of the per-iteration time (see the module docstring)
MIN_WINDOW = 4


def period(method: str, gpus: int) -> int:
    """Steps after which the method's communication pattern repeats (see the module docstring)."""
    if method == "allreduce":
        return 1
    if method == "decent-aer":
        return 2
    return gpus.bit_length() - 1  # log2 n rounds of the one-peer exponential graph


def cell_steps(method: str, gpus: int) -> int:
    """Warm-up plus the smallest whole number of periods that is at least ``MIN_WINDOW`` steps."""
    p = period(method, gpus)
    return WARMUP + p * -(-MIN_WINDOW // p)


def cell_config(
    setup: str, gpus: int, method: str, steps: int, workload: str = WORKLOAD, batch_per_gpu: int | None = None
) -> dict[str, Any]:
    """The run config of one cell (a proxy CNN on 8x8 synthetic images, time charged as ``workload``, by default
    Transformer-base with the 25K-token global batch split evenly; ``batch_per_gpu`` overrides the split)."""

    plugin, params = METHODS[method]
    return {
        "name": f"fig6-{setup}-{gpus}-{method}",
        "paper": "decentdp",
        "method": plugin,
        "method_params": params,
        "profile": f"{setup}-{gpus}",
        "dataset": {
            "name": "synthetic",
            "params": {"num_classes": 4, "image_size": 8, "train_size": 4096, "test_size": 64},
        },
        "model": {"name": "small_cnn"},
        "batch_size": batch_per_gpu or GLOBAL_BATCH // gpus,
        "emulated_workload": workload,
        "budget": {"steps": steps},
        "eval": {"every_steps": 1, "batch_size": 64},
        "seeds": [0],
        "torch_threads": 1,
    }


def ms_per_iter(evals: list[api.EvalPoint]) -> float:
    """Emulated milliseconds per step between the evaluation after the warm-up and the last one."""
    first = next(e for e in evals if e.step == WARMUP)
    last = evals[-1]
    return 1000.0 * (last.emulated_s - first.emulated_s) / (last.step - first.step)


def run_cell(
    ctx: api.ReportContext,
    setup: str,
    gpus: int,
    method: str,
    steps: int | None = None,
    workload: str = WORKLOAD,
    batch_per_gpu: int | None = None,
) -> tuple[float, float]:
    """(ms per iteration, wall seconds the cell took); ``steps`` defaults to :func:`cell_steps`."""

    wall = time.perf_counter()
    steps = steps or cell_steps(method, gpus)
    evals = ctx.train(cell_config(setup, gpus, method, steps, workload, batch_per_gpu))
    return ms_per_iter(evals), time.perf_counter() - wall


def build(ctx: api.ReportContext) -> list[Path]:
    """Run the 36 cells; write ``fig6.csv`` (setup, gpus, method, ms_per_iter, steps, wall_s) and ``fig6.png`` into
    the report's folder."""
    out = ctx.out_dir
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for setup, sizes in SETUPS.items():
        for gpus in sizes:
            for method in METHODS:
                ms, wall = run_cell(ctx, setup, gpus, method)
                rows.append(
                    {
                        "setup": setup,
                        "gpus": gpus,
                        "method": method,
                        "ms_per_iter": round(ms, 2),
                        "steps": cell_steps(method, gpus),
                        "wall_s": round(wall, 1),
                    }
                )
    csv_path = out / "fig6.csv"
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["setup", "gpus", "method", "ms_per_iter", "steps", "wall_s"])
        writer.writeheader()
        writer.writerows(rows)
    return [csv_path, plot(rows, out / "fig6.png")]


def plot(rows: list[dict[str, Any]], path: Path) -> Path:
    """Three panels side by side, grouped bars of ms/iteration per GPU count, as the paper lays out Fig. 6."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    width = 0.2
    for ax, (setup, sizes) in zip(axes, SETUPS.items(), strict=True):
        for m, method in enumerate(METHODS):
            ys = [
                next(r["ms_per_iter"] for r in rows if (r["setup"], r["gpus"], r["method"]) == (setup, g, method))
                for g in sizes
            ]
            ax.bar([i + (m - 1.5) * width for i in range(len(sizes))], ys, width, label=method)
        ax.set_xticks(range(len(sizes)), [str(g) for g in sizes])
        ax.set_xlabel("GPUs")
        ax.set_title(LABELS[setup], fontsize=9)
    axes[0].set_ylabel("emulated ms / iteration")
    axes[0].legend(fontsize=7)
    fig.suptitle("Decent-DP Fig. 6 as predicted by the emulator (Transformer-base, 25K tokens/iteration)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
