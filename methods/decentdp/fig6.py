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
weigh them wrongly. Periods: 1 (AllReduce), 2 log2 N on N nodes (AER: an intra- and an inter-node round per
exponent), log2 n (the one-peer exponential graph of Decent (Exp) and SGP (Exp)).

``python -m`` is not needed: ``distrepro reproduce decentdp`` calls :func:`build` after the arms (the plugin's
``products`` hook) with the harness's :class:`distrepro.api.ReportContext`, which trains each cell.

The grid is computed once per code and profile version: the key is the harness's
``ctx.code_version(CELL_PLUGINS)``, a digest of every file whose contents can change a cell (the cells' method
plugins, this folder included, and the harness's own timing, hardware, engine, training, config and api code,
profiles and workloads), and :func:`build` retrains only when the key differs from the one saved beside the csv
(``fig6.key``). A report folder without that pair (a fresh one: a reproduction started in an empty folder, or the
exploratory report's) reads the pair committed beside this checkout's ``methods/`` (``reports/decentdp/fig6.csv``
and ``fig6.key``, :data:`REFERENCE`) when its key is this code's, and copies it: the grid took 25-50 s of CPU,
half the report stage, to recompute the committed numbers. A changed input changes the key and retrains; the
line printed says which copy was read. ``fig6.key`` also holds the csv's own SHA-256, so a csv edited by hand
under an unchanged key is not read as the code's grid: it retrains.
The cells log to their own experiment, ``distrepro/decentdp-fig6``, so the paper's runs table holds only its
arms; one progress line per cell (counter, cell, ETA) replaces their per-step lines. The csv holds only what the
emulator predicts (no wall time), and is rewritten only when a value changed, so rebuilding it leaves the
committed copy, and the checkout, as they were.
"""

from __future__ import annotations

import csv
import hashlib
import io
import sys
import time
from pathlib import Path
from typing import Any

from distrepro import api

from . import topology

SETUPS: dict[str, tuple[int, ...]] = {"t4-ib": (16, 32, 64), "a100-ib": (8, 16, 32), "a40-25gbe": (8, 16, 32)}
#: GPUs a node of each cluster (the profiles; the authors' Slurm scripts: ``T4:8``, ``A100:4``, ``A40:4``)
GPUS_PER_NODE = {"t4-ib": 8, "a100-ib": 4, "a40-25gbe": 4}
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
#: the cells' MLflow experiment is ``distrepro/<EXPERIMENT>``: apart from the paper's arms
EXPERIMENT = "decentdp-fig6"
COLUMNS = ["setup", "gpus", "method", "ms_per_iter", "steps"]
#: the method plugins whose code a cell runs, this one (its folder, which holds this file) included: the grid's
#: cache key is the harness's version of their code and its own (``ctx.code_version``)
CELL_PLUGINS = tuple(sorted({plugin for plugin, _ in METHODS.values()} | {Path(__file__).resolve().parent.name}))
#: the committed grid and its key, beside the ``methods/`` folder holding this plugin (absent in a wheel)
REFERENCE = Path(__file__).resolve().parents[2] / "reports" / "decentdp"
#: what the report shows under ``fig6.png`` (declared through ``products.describe``)
CAPTION = (
    "Decent-DP Fig. 6 as the emulator predicts it: emulated milliseconds per iteration (Transformer-base, "
    "25K tokens per iteration) by GPU count, per method, on three emulated clusters"
)


#: the topology whose rounds each gossip method cycles through (SGP's one-peer exponential graph is the Decent one's)
TOPOLOGIES = {"sgp-exp": "one-peer-exp", "decent-exp": "one-peer-exp", "decent-aer": "alternating-exp-ring"}


def period(method: str, gpus: int, setup: str) -> int:
    """Steps after which the method's communication pattern repeats: its topology's rounds (the plugin's own
    ``topology.rounds``), 1 for All-Reduce (see the module docstring)."""
    name = TOPOLOGIES.get(method)
    return 1 if name is None else len(topology.rounds(name, gpus, GPUS_PER_NODE[setup]))


def cell_steps(method: str, gpus: int, setup: str) -> int:
    """Warm-up plus the smallest whole number of periods that is at least ``MIN_WINDOW`` steps."""
    p = period(method, gpus, setup)
    return WARMUP + p * -(-MIN_WINDOW // p)


def cell_config(
    setup: str, gpus: int, method: str, steps: int, workload: str = WORKLOAD, batch_per_gpu: int | None = None
) -> dict[str, Any]:
    """The run config of one cell (a proxy CNN on 8x8 synthetic images, time charged as ``workload``, by default
    Transformer-base with the 25K-token global batch split evenly; ``batch_per_gpu`` overrides the split)."""

    plugin, params = METHODS[method]
    return {
        "name": f"fig6-{setup}-{gpus}-{method}",
        "paper": EXPERIMENT,
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
    steps = steps or cell_steps(method, gpus, setup)
    evals = ctx.train(cell_config(setup, gpus, method, steps, workload, batch_per_gpu))
    return ms_per_iter(evals), time.perf_counter() - wall


def build(ctx: api.ReportContext) -> list[Path]:
    """Write ``fig6.csv`` (setup, gpus, method, ms_per_iter, steps) and ``fig6.png`` into the report's folder,
    training the 36 cells only when no saved grid (this folder's, else :data:`REFERENCE`) has this code's key
    (``ctx.code_version``)."""
    out = ctx.out_dir
    out.mkdir(parents=True, exist_ok=True)
    csv_path, key_path = out / "fig6.csv", out / "fig6.key"
    key = ctx.code_version(CELL_PLUGINS)
    grids = {folder: _saved(folder, key) for folder in dict.fromkeys([out.resolve(), REFERENCE])}
    saved = next((folder for folder, grid in grids.items() if grid), None)
    if saved is None:
        rows = _train_grid(ctx)
        text = _csv_text(rows)
    else:  # the saved csv's bytes as they are: a copy of the committed grid is the committed grid
        rows, text = grids[saved] or [], (saved / "fig6.csv").read_text(encoding="utf-8")
        where = "unchanged since" if saved == out.resolve() else "read from the cache"
        print(f"Fig. 6 grid: {len(rows)} cells {where} {saved / 'fig6.csv'} (same code and profiles: key "
              f"{key[:12]}); nothing trained", file=sys.stderr)  # fmt: skip
    if not csv_path.is_file() or csv_path.read_text(encoding="utf-8") != text:
        csv_path.write_text(text, encoding="utf-8")
    if not key_path.is_file() or key_path.read_text() != key_text(key, text):
        key_path.write_text(key_text(key, text))
    return [csv_path, plot(rows, out / "fig6.png")]


def key_text(key: str, csv_text: str) -> str:
    """What ``fig6.key`` holds: the code's key, then the csv's SHA-256 (the grid those inputs produced)."""
    return f"{key}\ncsv sha256 {hashlib.sha256(csv_text.encode('utf-8')).hexdigest()}\n"


def _saved(folder: Path, key: str) -> list[dict[str, Any]] | None:
    """The grid saved in ``folder`` if its ``fig6.key`` is ``key`` and the csv's digest beside it (None otherwise,
    or when unreadable)."""
    key_path, csv_path = folder / "fig6.key", folder / "fig6.csv"
    if not key_path.is_file() or not csv_path.is_file():
        return None
    if key_path.read_text() != key_text(key, csv_path.read_text(encoding="utf-8")):
        return None
    return _read(csv_path)


def _train_grid(ctx: api.ReportContext) -> list[dict[str, Any]]:
    """Every cell, one progress line each: ``Fig. 6 grid: cell k/36 <setup> <gpus> <method> … ETA``."""
    cells = [(setup, gpus, method) for setup, sizes in SETUPS.items() for gpus in sizes for method in METHODS]
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for k, (setup, gpus, method) in enumerate(cells, 1):
        ms, _ = run_cell(ctx, setup, gpus, method)
        rows.append({"setup": setup, "gpus": gpus, "method": method, "ms_per_iter": round(ms, 2),
                     "steps": cell_steps(method, gpus, setup)})  # fmt: skip
        elapsed = time.perf_counter() - start
        eta = elapsed / k * (len(cells) - k)
        print(f"Fig. 6 grid: cell {k}/{len(cells)} {setup} {gpus} GPUs {method}: {ms:.2f} ms/iter "
              f"(elapsed {elapsed:.0f} s, ETA {eta:.0f} s)", file=sys.stderr, flush=True)  # fmt: skip
    return rows


def _csv_text(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _read(path: Path) -> list[dict[str, Any]] | None:
    """The grid saved in ``path`` (None if absent or not a grid of :data:`COLUMNS`)."""
    if not path.is_file():
        return None
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or set(COLUMNS) - set(rows[0]):
        return None
    return [{**r, "gpus": int(r["gpus"]), "ms_per_iter": float(r["ms_per_iter"]), "steps": int(r["steps"])}
            for r in rows]  # fmt: skip


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
    handles, names = axes[0].get_legend_handles_labels()  # below the panels: a legend inside one hid a bar
    fig.legend(handles, names, loc="lower center", ncol=len(METHODS), fontsize=8, frameon=False)
    fig.suptitle("Decent-DP Fig. 6 as predicted by the emulator (Transformer-base, 25K tokens/iteration)", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
