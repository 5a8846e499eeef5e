"""The validation's DDP points that have a layer table, priced by the in-process engine beside the analytical model.

Why: ``validate_emulator.py`` prices a DDP point analytically (``validation_model.ddp_step_seconds``: buckets cut
from the model's layer table, PyTorch's reducer, the contention of the all-reduce with backward, the expected
slowest of p), a restatement of what the engines charge. Whoever checks the emulator from outside runs their points
through the engine itself, on a profile written from each 1-GPU row. If the two disagreed, the out-of-sample error
the validation reports would describe the restatement, not the engine. This prices every point whose model has a
layer table (``hardware_profiles/layers/``) both ways, each source in its own fold (the constants it is scored
with, derived without it), and reports their ratio beside each one's error against the measurement.

The engine runs AR-SGD (PyTorch DDP's 25 MiB buckets, overlap on) for :data:`STEPS` steps on a profile made from
the point's cluster (:func:`validation_cluster.cluster_profile`) with the model's workload and the framework's
default noise (each step's jitter :data:`~distrepro.timing.framework.STEP_CV` and each GPU's own speed
:data:`~distrepro.timing.framework.GPU_CV`), timed after :data:`WARMUP` steps and averaged over ``--seeds`` seeds
(the analytical model charges the expectation). What the engine does not run is left in the analytical price, so
the ratio shows it: a source's own per-step loop work (``per_step:``, e.g. a loss all-reduced every step) and its
own buckets (apex's message size). ``--no-noise`` prices both without noise: then the two should agree to rounding.

    python benchmarks/validation_engine.py                  # every point with a layer table, 3 seeds each
    python benchmarks/validation_engine.py --points dle-rn50-a100-amp-n8 --seeds 5
    python benchmarks/validation_engine.py --data with_my_points.yaml --points my-point-n8
    python benchmarks/validation_engine.py --draws 6          # the engine cells (Decent-DP's points) over 6 seeds

``--draws N`` answers another question about the engine's share of the validation: the Decent-DP points are engine
runs priced on their first seed, one draw of their GPUs' own speeds; it runs each over seeds 0..N-1 and says how
far the first seed's price is from their mean (the error bands are built on the first).
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

import yaml
from validation_cluster import cluster_profile, compute_figures
from validation_folds import fold
from validation_model import TERMS, Outcome, engine_cell_config, engine_cell_ms, predict
from validation_paths import DATA

from distrepro.hardware.profiles import read_yaml_mapping
from distrepro.timing import framework as fw

#: steps each engine run takes, and how many of them are left out before timing (the first buckets are rebuilt)
STEPS, WARMUP = 11, 3
#: the profile's name in the temporary root the engine reads it from
PROFILE = "validation-engine"


def engine_points(data: dict[str, Any], ids: list[str] | None = None) -> list[dict[str, Any]]:
    """The scored DDP points whose model names a workload with a layer table (``ids``: these only)."""
    out = []
    for p in data["points"]:
        if p["kind"] != "ddp_throughput" or p.get("role", "validate") != "validate":
            continue
        if "workload" not in data["models"][p["model"]]:
            continue
        if ids is None or p["id"] in ids:
            out.append(p)
    missing = sorted(set(ids or []) - {p["id"] for p in out})
    if missing:
        raise SystemExit(f"validation_engine: not a scored DDP point with a layer table: {', '.join(missing)}")
    return out


def engine_profile(data: dict[str, Any], point: dict[str, Any], noise: bool) -> dict[str, Any]:
    """The point's cluster as a profile file's contents, charging the model's workload at the 1-GPU row's speed."""
    workload = data["models"][point["model"]]["workload"]
    gpu = data["clusters"][point["cluster"]]["gpu"]
    t_fixed, peak = compute_figures(data, point, gpu)
    profile = cluster_profile(data, point["cluster"], point["gpus"], t_fixed, peak).model_dump(
        mode="json", exclude_none=True
    )
    for node in profile["nodes"]:
        for device in node["devices"]:
            device["throughput_samples_per_s"] = {workload: peak}
            device["step_overhead_ms"] = {workload: t_fixed * 1000.0}
    profile["name"] = PROFILE
    if noise:
        profile["noise"] = {
            "compute_cv": fw.STEP_CV,
            "gpu_cv": fw.GPU_CV,
            "source": "[E] the framework's defaults (distrepro/timing/framework.py: STEP_CV, GPU_CV)",
        }
    return profile


def engine_step_s(point: dict[str, Any], workload: str, seed: int) -> float:
    """Seconds per step of one engine run on the profile written under ``DISTREPRO_PATH`` (after the warm-up)."""
    from distrepro.config.run_config import validate_config
    from distrepro.job.resolve import build_job
    from distrepro.orchestration.campaign import get_engine

    cfg = validate_config(
        {
            "name": f"validation-engine-{point['id']}",
            "paper": "validation-engine",
            "method": "ar_sgd",
            "profile": PROFILE,
            "dataset": {
                "name": "synthetic",
                "params": {"num_classes": 4, "image_size": 8, "train_size": 4096, "test_size": 64},
            },
            "model": {"name": "small_cnn"},
            "batch_size": int(point["tokens_per_gpu"]),
            "emulated_workload": workload,
            "budget": {"steps": STEPS},
            "eval": {"every_steps": 1, "batch_size": 64},
            "seeds": [seed],
            "torch_threads": 1,
        }
    )
    evals = get_engine(cfg.engine).run_cell(build_job(cfg, seed), None).evals
    first = next(e for e in evals if e.step == WARMUP)
    last = evals[-1]
    return (last.emulated_s - first.emulated_s) / (last.step - first.step)


def price(raw: dict[str, Any], point: dict[str, Any], seeds: int, noise: bool) -> dict[str, Any]:
    """One point in its source's fold, analytically and by the engine (the mean over ``seeds`` runs)."""
    data, _ = fold(raw, point["source"])
    saved = dict(TERMS)
    if not noise:
        TERMS.update(slowest_of_p=False, gpu_variability=False)
    try:
        analytic: Outcome = predict(data, point)
    finally:
        TERMS.update(saved)
    samples = point["gpus"] * point["tokens_per_gpu"]
    workload = data["models"][point["model"]]["workload"]
    with tempfile.TemporaryDirectory(prefix="validation-engine-") as root:
        (Path(root) / "hardware_profiles").mkdir()
        text = yaml.safe_dump(engine_profile(data, point, noise), sort_keys=False)
        (Path(root) / "hardware_profiles" / f"{PROFILE}.yaml").write_text(text, encoding="utf-8")
        before = os.environ.get("DISTREPRO_PATH")
        os.environ["DISTREPRO_PATH"] = root
        try:
            steps = [engine_step_s(point, workload, seed) for seed in range(seeds if noise else 1)]
        finally:
            if before is None:
                os.environ.pop("DISTREPRO_PATH", None)
            else:
                os.environ["DISTREPRO_PATH"] = before
    engine_rate = samples / statistics.mean(steps)
    return {
        "id": point["id"],
        "source": point["source"],
        "gpus": point["gpus"],
        "measured": point["measured"],
        "analytic": round(analytic.predicted, 2),
        "engine": round(engine_rate, 2),
        "engine_over_analytic": round(engine_rate / analytic.predicted, 5),
        # + = predicted too fast, as the validation signs a rate
        "analytic_signed": round(analytic.predicted / point["measured"] - 1, 4),
        "engine_signed": round(engine_rate / point["measured"] - 1, 4),
        "engine_step_ms": [round(s * 1000, 3) for s in steps],
    }


def engine_cell_draws(data: dict[str, Any], seeds: int) -> list[dict[str, Any]]:
    """Each engine cell (``kind: engine_cell``) run on seeds 0..``seeds``-1 as ``validation_model.predict_engine``
    runs it on the first: ms per iteration per seed, their mean, and the first seed's distance from the mean."""
    rows = []
    for p in data["points"]:
        if p["kind"] != "engine_cell":
            continue
        raw = engine_cell_config(p)
        ms = [engine_cell_ms({**raw, "seeds": [seed]}) for seed in range(seeds)]
        mean = statistics.mean(ms)
        rows.append(
            {"id": p["id"], "measured": p["measured"], "ms": [round(m, 2) for m in ms], "mean": round(mean, 2),
             "first_from_mean": round(ms[0] / mean - 1, 4)}
        )  # fmt: skip
    return rows


def render_draws(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| engine cell | measured ms | seed 0 | mean | range | seed 0 from the mean |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['id']} | {r['measured']} | {r['ms'][0]:.2f} | {r['mean']:.2f} "
            f"| {min(r['ms']):.2f}-{max(r['ms']):.2f} | {r['first_from_mean']:+.2%} |"
        )
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    gaps = [abs(r["engine_over_analytic"] - 1) for r in rows]
    return {
        "points": len(rows),
        "median_gap": statistics.median(gaps),
        "worst_gap": max(gaps),
        "analytic_median_abs_error": statistics.median(abs(r["analytic_signed"]) for r in rows),
        "engine_median_abs_error": statistics.median(abs(r["engine_signed"]) for r in rows),
        "engine_median_signed_error": statistics.median(r["engine_signed"] for r in rows),
    }


def render(rows: list[dict[str, Any]], result: dict[str, Any]) -> str:
    lines = [
        "| point | source | GPUs | measured | analytic | engine | engine / analytic | engine error (+ = fast) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['id']} | {r['source']} | {r['gpus']} | {r['measured']:.6g} | {r['analytic']:.6g} "
            f"| {r['engine']:.6g} | {r['engine_over_analytic']:.4f} | {r['engine_signed']:+.1%} |"
        )
    lines.append(
        f"\n{result['points']} points, each in its source's fold: engine / analytic median gap "
        f"{result['median_gap']:.2%}, worst {result['worst_gap']:.2%}; median |error| analytic "
        f"{result['analytic_median_abs_error']:.1%}, engine {result['engine_median_abs_error']:.1%} "
        f"(signed {result['engine_median_signed_error']:+.1%})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", nargs="+", metavar="ID", help="these points only (default: every one)")
    parser.add_argument("--seeds", type=int, default=3, help="engine runs per point, averaged (default 3)")
    parser.add_argument("--no-noise", action="store_true", help="both sides without noise: they should agree")
    parser.add_argument(
        "--data",
        type=Path,
        default=DATA,
        help="the points and constants (default: the committed benchmarks/data/emulator_points.yaml); a copy with "
        "points added (a model with a workload that has a layer table) prices them the same way, in their fold",
    )
    parser.add_argument("--json", type=Path, help="also write the rows and the summary here")
    parser.add_argument(
        "--draws",
        type=int,
        metavar="N",
        help="instead: the engine cells (Decent-DP's points) over seeds 0..N-1, against the first seed they are "
        "priced on",
    )
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    start = time.perf_counter()
    raw = read_yaml_mapping(args.data, "emulator validation data")
    if args.draws is not None:
        if args.draws < 2:
            parser.error("--draws must be at least 2")
        print(render_draws(engine_cell_draws(raw, args.draws)))
        print(f"({time.perf_counter() - start:.0f} s)")
        return 0
    points = engine_points(raw, args.points)
    rows = []
    for n, point in enumerate(points, 1):
        rows.append(price(raw, point, args.seeds, not args.no_noise))
        print(f"[{n}/{len(points)}] {point['id']}", file=sys.stderr, flush=True)
    result = summary(rows)
    print(render(rows, result))
    print(f"({time.perf_counter() - start:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": result}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
