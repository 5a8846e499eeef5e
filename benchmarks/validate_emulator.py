"""Check the emulator's time model against published measurements of real clusters (issue 23).

Every point in ``benchmarks/data/emulator_points.yaml`` is a measurement someone else published (its source is
named there: NVIDIA's DeepLearningExamples tables, nccl-tests outputs in NVIDIA's trackers, the Decent-DP
authors' figures and logs). This script predicts each one with the emulator's own code (the compute model
``t_fixed + b / peak``, the collective model with NCCL's algorithm and protocol choice, the in-process engine
for the Decent-DP cells) from the constants and specifications written next to the points, and reports the
relative error per point, the median and worst error per source and overall, and whether the ordering of
methods in each published comparison comes out right. Nothing is trained but the engine cells' tiny proxy (a
few steps of an 8x8 CNN); nothing is fitted here: the constants are derived once, from the points marked
``role: calibrate``, which are left out of the statistics.

    python benchmarks/validate_emulator.py            # the table, the summary, exit 1 if a bound is missed
    python benchmarks/validate_emulator.py --json out.json

Bounds (issue 23, "Done when"): median absolute error <= 15 % over all points, <= 25 % within each source,
and every ordering right. The script reports whether they hold; the test (``tests/benchmarks``) runs it and
asserts what it reports. Issue 33's goals (median <= 10 %, median *signed* error within +-3 %, <= 20 % within
each source) are reported beside them as goals, not asserted: they are not a target to fit.

A DDP step (issue 33) is charged with the framework's costs (:mod:`distrepro.timing.framework`): the reducer's
per-tensor launches and bucket copies at the GPU's memory bandwidth, the expected slowest of p workers' compute
(per-step jitter), and the contention of the all-reduce with the backward it overlaps; a model with a per-layer
table (ResNet-50) has its buckets and ready times from it. ``--ablate`` also prints the summary with each term
off, to show what each moves.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrepro.api.overlap import DDP_BUCKET_BYTES, emulated_buckets
from distrepro.hardware.profiles import HardwareProfile, read_yaml_mapping
from distrepro.hardware.workloads import load_workloads
from distrepro.timing import framework as fw
from distrepro.timing.timemodel import CommCostModel, ComputeModel

DATA = Path(__file__).resolve().parent / "data" / "emulator_points.yaml"
FIG6 = Path(__file__).resolve().parents[1] / "reports" / "decentdp" / "fig6.csv"
#: issue 23's bounds on the median absolute relative error
OVERALL_BOUND, SOURCE_BOUND = 0.15, 0.25
#: the per-step fraction that is backward (gradient buckets become ready evenly over it), as the engine's default
BACKWARD_FRACTION = 2.0 / 3.0
WORKLOAD = "validation"
#: issue 33's goals: median absolute error, median signed error, median within each source
GOAL_OVERALL, GOAL_SIGNED, GOAL_SOURCE = 0.10, 0.03, 0.20
#: the framework terms of a DDP step (issue 33); ``--ablate`` switches each off in turn
TERMS = {"framework": True, "slowest_of_p": True, "contention": True, "layers": True}


@dataclass
class Outcome:
    point: dict[str, Any]
    predicted: float
    note: str = ""

    @property
    def error(self) -> float:
        return (self.predicted - self.point["measured"]) / self.point["measured"]


@dataclass
class Report:
    outcomes: list[Outcome]
    orderings: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def scored(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.point.get("role", "validate") == "validate"]

    def summary(self) -> dict[str, Any]:
        by_source: dict[str, list[float]] = {}
        for o in self.scored():
            by_source.setdefault(o.point["source"], []).append(o.error)
        per = {s: _stats(e) for s, e in sorted(by_source.items())}
        overall = _stats([o.error for o in self.scored()]) | {"sources": len(per)}
        checks = {
            "overall_median_within_bound": overall["median"] <= OVERALL_BOUND,
            "every_source_median_within_bound": all(v["median"] <= SOURCE_BOUND for v in per.values()),
            "every_ordering_right": all(o["right"] for o in self.orderings),
        }
        goals = {
            "overall_median_within_10pct": overall["median"] <= GOAL_OVERALL,
            "overall_signed_median_within_3pct": abs(overall["signed_median"]) <= GOAL_SIGNED,
            "every_source_median_within_20pct": all(v["median"] <= GOAL_SOURCE for v in per.values()),
        }
        return {"overall": overall, "per_source": per, "checks": checks, "goals": goals, "orderings": self.orderings}


def _stats(errors: list[float]) -> dict[str, Any]:
    """Median and worst absolute error, and the median *signed* error (positive: predicted too fast / too high)."""
    absolute = [abs(e) for e in errors]
    return {
        "points": len(errors),
        "median": statistics.median(absolute),
        "signed_median": statistics.median(errors),
        "worst": max(absolute),
    }


# ---------------------------------------------------------------------- building blocks


def _tau_s(data: dict[str, Any], gpu: str) -> float:
    """Fixed step cost per transformer sublayer on ``gpu`` (seconds)."""
    return data["constants"]["tau_v100_ms"]["value"] * data["gpus"][gpu]["tau_ratio"] / 1000.0


def _compute_figures(data: dict[str, Any], point: dict[str, Any], gpu: str) -> tuple[float, float]:
    """(t_fixed in s, peak in tokens/s) of the point's model on ``gpu``: t_fixed = sublayers x tau; the peak from
    the 1-GPU measurement ``peak_from`` (tokens/step, tokens/s) of the same table: peak = b / (t(b) - t_fixed).
    (A point whose batch is its 1-GPU row's gets t(b) = the measured 1-GPU step whatever t_fixed is.)"""
    sublayers = data["models"][point["model"]]["sublayers"]
    t_fixed = sublayers * _tau_s(data, gpu) if sublayers else 0.0
    ref = point.get("peak_from") or {"tokens_per_gpu": point["tokens_per_gpu"], "tok_s": point["measured"]}
    step = ref["tokens_per_gpu"] / ref["tok_s"]
    return t_fixed, ref["tokens_per_gpu"] / (step - t_fixed)


def _link(spec: dict[str, Any]) -> dict[str, Any]:
    return {"latency_us": spec["latency_us"], "bandwidth_gbytes_per_s": spec["gbytes_per_s"], "source": spec["source"]}


def cluster_profile(
    data: dict[str, Any], cluster: str, gpus: int, t_fixed: float = 0.0, peak: float = 1.0
) -> HardwareProfile:
    """An in-memory profile of ``gpus`` GPUs of ``cluster``, node by node, charging one token as one sample."""
    spec = data["clusters"][cluster]
    per = spec["gpus_per_node"]
    counts = [min(per, gpus - i) for i in range(0, gpus, per)]
    intra = _link(spec["intra"])
    nic = _link(spec.get("nic") or spec["intra"])
    device = {
        "name": spec["gpu"],
        "kind": "gpu",
        "memory_gib": 16,
        "throughput_samples_per_s": {WORKLOAD: peak},
        "step_overhead_ms": {WORKLOAD: t_fixed * 1000.0},
        "source": "[D] benchmarks/data/emulator_points.yaml",
    }
    nodes = [{"name": f"n{i}", "nic": nic, "devices": [device | {"count": c}]} for i, c in enumerate(counts)]
    profile = {
        "schema_version": 2,
        "name": f"{cluster}-{gpus}",
        "description": "validation cluster",
        "nodes": nodes,
        "network": {"intra_node": intra, "inter_node": nic},
    }
    return HardwareProfile.model_validate(profile)


def ddp_step_seconds(
    compute: ComputeModel,
    cost: CommCostModel,
    tokens: int,
    grad_bytes: float,
    ranks: int,
    model: dict[str, Any] | None = None,
    memory_bytes_per_s: float | None = None,
) -> float:
    """One data-parallel step with PyTorch DDP's overlap (:func:`distrepro.timing.framework.ddp_step_s`): buckets
    launched on one stream as backward makes them ready, the step ending when compute and the last bucket are done.

    Buckets: the model's per-layer table's (``workload:``, DDP's 1 MiB first bucket, then 25 MiB, ready when
    backward passes their last layer) scaled to ``grad_bytes``, else 25 MiB buckets ready evenly over backward.
    Framework terms (:data:`TERMS`): the reducer's ``tensors`` x launch cost and ``BUCKET_PASSES`` x ``grad_bytes``
    at the GPU's memory bandwidth added to backward; compute x the expected slowest of ``ranks`` (per-step jitter);
    backward slowed by the contention factor for as long as a bucket overlaps it."""
    model = model or {}
    t_c = compute.nominal_step_seconds(0, tokens)
    if TERMS["slowest_of_p"]:
        t_c *= fw.expected_max_factor(ranks)
    world = list(range(ranks))
    table = load_workloads()[model["workload"]].layers if TERMS["layers"] and model.get("workload") else None
    if table is not None:
        scale = grad_bytes / (4.0 * table.params)
        plan = [(b.ready, cost.all_reduce(world, b.nbytes * scale)) for b in emulated_buckets(table)]
    else:
        n_buckets = max(1, math.ceil(grad_bytes / DDP_BUCKET_BYTES))
        sizes = [DDP_BUCKET_BYTES] * (n_buckets - 1) + [grad_bytes - DDP_BUCKET_BYTES * (n_buckets - 1)]
        done, plan = 0.0, []
        for size in sizes:
            done += size
            plan.append((done / grad_bytes, cost.all_reduce(world, size)))
    overhead = 0.0
    if TERMS["framework"] and ranks > 1:
        overhead = model.get("tensors", 0) * fw.LAUNCH_S
        if memory_bytes_per_s:
            overhead += fw.BUCKET_PASSES * grad_bytes / memory_bytes_per_s
    contention = fw.CONTENTION if TERMS["contention"] else 0.0
    return fw.ddp_step_s(t_c, BACKWARD_FRACTION, plan, overhead, contention)


# ---------------------------------------------------------------------- predictions per kind


def predict_compute(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
    t_fixed, peak = _compute_figures(data, point, point["gpu"])
    profile = cluster_profile(data, "dgx-a100", 1, t_fixed, peak)  # links unused: one GPU
    compute = ComputeModel(profile, WORKLOAD, 1.0)
    step = compute.nominal_step_seconds(0, point["tokens_per_gpu"])
    note = f"t_fixed {t_fixed * 1e3:.1f} ms, peak {peak:,.0f} tok/s"
    return Outcome(point, point["tokens_per_gpu"] / step, note)


def predict_ddp(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
    gpu = data["clusters"][point["cluster"]]["gpu"]
    t_fixed, peak = _compute_figures(data, point, gpu)
    profile = cluster_profile(data, point["cluster"], point["gpus"], t_fixed, peak)
    compute = ComputeModel(profile, WORKLOAD, 1.0)
    cost = CommCostModel(profile)
    model = data["models"][point["model"]]
    grad = point.get("grad_bytes", model["grad_bytes"])
    memory = data["gpus"][gpu].get("memory_gbytes_per_s")
    step = ddp_step_seconds(
        compute, cost, point["tokens_per_gpu"], grad, point["gpus"], model, memory * 1e9 if memory else None
    )
    how = cost.collective("all_reduce", range(point["gpus"]), DDP_BUCKET_BYTES)
    note = f"step {step * 1e3:.1f} ms (compute {compute.nominal_step_seconds(0, point['tokens_per_gpu']) * 1e3:.1f}); "
    note += f"25 MiB bucket: {how.algorithm}/{how.protocol} {how.seconds * 1e3:.2f} ms"
    return Outcome(point, point["gpus"] * point["tokens_per_gpu"] / step, note)


def predict_nccl(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
    n = point["gpus"]
    profile = cluster_profile(data, point["cluster"], n)
    how = CommCostModel(profile).collective("all_reduce", range(n), point["bytes"])
    note = f"{how.algorithm}/{how.protocol}, {how.seconds * 1e6:.1f} us"
    if point["unit"] == "us":
        return Outcome(point, how.seconds * 1e6, note)
    return Outcome(point, point["bytes"] / how.seconds * 2 * (n - 1) / n / 1e9, note)


def predict_engine(point: dict[str, Any]) -> Outcome:
    """The Decent-DP grid's cell on the shipped profile, run by the in-process engine alone (nothing logged)."""
    from distrepro.config.run_config import validate_config
    from distrepro.job.resolve import build_job
    from distrepro.orchestration.campaign import get_engine
    from distrepro.plugins.registry import plugin_module

    fig6 = plugin_module("decentdp", "fig6")
    steps = fig6.cell_steps(point["method"], point["gpus"])
    workload = point.get("workload", fig6.WORKLOAD)
    raw = fig6.cell_config(point["setup"], point["gpus"], point["method"], steps, workload, point.get("batch_per_gpu"))
    cfg = validate_config(raw)
    run = get_engine(cfg.engine).run(build_job(cfg, cfg.seeds[0]))
    return Outcome(point, fig6.ms_per_iter(run.evals), f"in-process engine, hardware_profiles/{cfg.profile}.yaml")


def predict(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
    kind = point["kind"]
    if kind == "compute_throughput":
        return predict_compute(data, point)
    if kind == "ddp_throughput":
        return predict_ddp(data, point)
    if kind == "nccl_allreduce":
        return predict_nccl(data, point)
    if kind == "engine_cell":
        return predict_engine(point)
    raise ValueError(f"point {point['id']}: unknown kind {kind!r}")


# ---------------------------------------------------------------------- orderings


def orderings(data: dict[str, Any], outcomes: list[Outcome], fig6: Path = FIG6) -> list[dict[str, Any]]:
    """Each published comparison of methods, checked on the predictions: the measured pairs among the points, and
    the paper's stated orderings (``comparisons`` in the data file) on the Fig. 6 grid the current model built
    (``reports/decentdp/fig6.csv``; its cells that are also points here must equal the fresh predictions, so a
    stale grid fails instead of passing)."""
    out: list[dict[str, Any]] = []
    by_id = {o.point["id"]: o for o in outcomes}
    grid: dict[tuple[str, int, str], float] = {}
    if fig6.is_file():
        with fig6.open(encoding="utf-8") as fh:
            grid = {(r["setup"], int(r["gpus"]), r["method"]): float(r["ms_per_iter"]) for r in csv.DictReader(fh)}
    for o in outcomes:
        p = o.point
        if p["kind"] == "engine_cell" and "workload" not in p:
            cell = grid.get((p["setup"], p["gpus"], p["method"]))
            fresh = cell is not None and abs(cell - o.predicted) <= 0.01 + 1e-3 * o.predicted
            out.append(
                {
                    "what": f"{fig6.name} cell {p['setup']}/{p['gpus']}/{p['method']} is current",
                    "right": fresh,
                    "detail": f"grid {cell} vs fresh {o.predicted:.2f} ms",
                }
            )
    for comp in data.get("comparisons", []):
        if "faster" in comp:  # two measured points: the faster must be predicted faster
            fast, slow = by_id[comp["faster"]], by_id[comp["slower"]]
            right = fast.predicted < slow.predicted
            detail = f"{fast.predicted:.1f} < {slow.predicted:.1f} ms predicted ({comp['source_says']})"
            out.append({"what": comp["what"], "right": right, "detail": detail})
            continue
        for setup, gpus in comp["cells"]:
            a = grid.get((setup, gpus, comp["faster_method"]))
            b = grid.get((setup, gpus, comp["slower_method"]))
            right = a is not None and b is not None and a < b
            detail = f"{comp['faster_method']} {a} < {comp['slower_method']} {b} ms ({comp['source_says']})"
            out.append({"what": f"{comp['what']} at {setup}/{gpus}", "right": right, "detail": detail})
    return out


# ---------------------------------------------------------------------- driver


def run(path: Path = DATA, fig6: Path = FIG6) -> Report:
    start = time.perf_counter()
    data = read_yaml_mapping(path, "emulator validation data")
    outcomes = [predict(data, p) for p in data["points"]]
    report = Report(outcomes, orderings(data, outcomes, fig6))
    report.seconds = time.perf_counter() - start
    return report


def render(report: Report) -> str:
    lines = ["| point | source | measured | predicted | error | how |", "|---|---|---:|---:|---:|---|"]
    for o in report.outcomes:
        p = o.point
        tag = " (calibration)" if p.get("role") == "calibrate" else ""
        lines.append(
            f"| {p['id']}{tag} | {p['source']} | {p['measured']:,.4g} {p['unit']} | {o.predicted:,.4g} | "
            f"{o.error:+.1%} | {o.note} |"
        )
    s = report.summary()
    lines += ["", _SUMMARY_HEAD, "|---|---:|---:|---:|---:|"]
    lines += [_summary_row(src, v) for src, v in s["per_source"].items()]
    lines.append(_summary_row("**all**", s["overall"]))
    lines += ["", "| ordering | right | detail |", "|---|---|---|"]
    lines += [f"| {c['what']} | {'yes' if c['right'] else 'NO'} | {c['detail']} |" for c in s["orderings"]]
    lines += ["", f"checks (issue 23 bounds): {s['checks']}", f"goals (issue 33): {s['goals']}"]
    lines.append(f"({report.seconds:.1f} s)")
    return "\n".join(lines)


_SUMMARY_HEAD = "| source | points | median abs. error | median signed error | worst abs. error |"


def _summary_row(name: str, v: dict[str, Any]) -> str:
    return f"| {name} | {v['points']} | {v['median']:.1%} | {v['signed_median']:+.1%} | {v['worst']:.1%} |"


def ablation(path: Path = DATA) -> str:
    """The analytical points' summary with each framework term off in turn (the engine cells are left out: they
    do not depend on these switches)."""
    data = read_yaml_mapping(path, "emulator validation data")
    points = [p for p in data["points"] if p["kind"] != "engine_cell"]
    lines = [
        "| terms | points | median abs. error | median signed error | worst abs. error |",
        "|---|---:|---:|---:|---:|",
    ]
    for off in (None, *TERMS):
        saved = dict(TERMS)
        if off is not None:
            TERMS[off] = False
        try:
            report = Report([predict(data, p) for p in points])
        finally:
            TERMS.update(saved)
        lines.append(_summary_row("all on" if off is None else f"without {off}", report.summary()["overall"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--fig6", type=Path, default=FIG6)
    parser.add_argument("--json", type=Path, help="also write the summary and every point here")
    parser.add_argument("--ablate", action="store_true", help="also print the summary with each framework term off")
    args = parser.parse_args(argv)
    report = run(args.data, args.fig6)
    print(render(report))
    if args.ablate:
        print("\n" + ablation(args.data))
    if args.json:
        points = [{"id": o.point["id"], "predicted": o.predicted, "error": o.error} for o in report.outcomes]
        args.json.write_text(json.dumps(report.summary() | {"points": points}, indent=1), encoding="utf-8")
    return 0 if all(report.summary()["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
