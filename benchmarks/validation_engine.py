"""The validation's DDP points priced by the in-process engine beside the analytical model the validation scores.

Why: ``validate_emulator.py`` prices a DDP point analytically (``validation_model.ddp_step_seconds``: buckets cut
from the model's layer table, PyTorch's reducer, the contention of the all-reduce with backward, the expected
slowest of p), a restatement of what the engines charge. Whoever checks the emulator from outside runs their points
through the engine itself, on a profile written from each 1-GPU row. If the two disagreed, the out-of-sample error
the validation reports would describe the restatement, not the engine. This prices points both ways, each source in
its own fold (the constants it is scored with, derived without it), and reports their ratio beside each one's error
against the measurement: every point whose model has a layer table (``hardware_profiles/layers/``), and every point
of another model that the validation charges nothing the engine does not run (:func:`own_terms`), on a table that
states the validation's own assumption (:func:`even_table`: the embedding ready when backward ends, the rest evenly).

The engine runs AR-SGD (PyTorch DDP's 25 MiB buckets, overlap on) for :data:`STEPS` steps on a profile made from
the point's cluster (:func:`validation_cluster.cluster_profile`) with the model's workload and the framework's
default noise (each step's jitter :data:`~distrepro.timing.framework.STEP_CV` and each GPU's own speed
:data:`~distrepro.timing.framework.GPU_CV`), timed after :data:`WARMUP` steps and averaged over ``--seeds`` seeds
(the analytical model charges the expectation). What the engine does not run is left in the analytical price, so
the ratio shows it (the ``own_terms`` of a point with a table: e.g. a loss all-reduced every step, apex's buckets).
``--no-noise`` prices both without noise: then the two should agree to rounding.

    python benchmarks/validation_engine.py                  # every such point, 3 seeds each
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
from validation_scripts import (
    batch_spread_of,
    bucketing_of,
    loop_extras_of,
    reducer_of,
    synced_share,
    unsynced_micro_batches,
)

from distrepro.hardware.profiles import read_yaml_mapping
from distrepro.timing import framework as fw

#: steps each engine run takes, and how many of them are left out before timing (the first buckets are rebuilt)
STEPS, WARMUP = 11, 3
#: the most samples a proxy worker trains a step: a point's batch above it is charged at the same step time by
#: scaling the profile's throughput with the batch (:func:`proxy_batch`), so a 6,144-token step costs no more CPU
PROXY_BATCH = 256
#: the profile's name in the temporary root the engine reads it from
PROFILE = "validation-engine"


def own_terms(data: dict[str, Any], point: dict[str, Any]) -> list[str]:
    """What the validation charges the point for its source's own code, which the engine does not run: its DDP's
    reducer or buckets when not PyTorch's defaults, length-bucketed batches, per-step loop work, accumulation."""
    model = data["models"][point["model"]]
    grad = point.get("grad_bytes", model["grad_bytes"])
    terms = []
    if reducer_of(data, point).name != "torch" or bucketing_of(data, point, grad)[0] != "torch-default":
        terms.append("buckets")
    if batch_spread_of(data, point) is not None:
        terms.append("spread")
    if loop_extras_of(data, point) is not None:
        terms.append("loop")
    if point.get("accumulation") or synced_share(data, point) < 1 or unsynced_micro_batches(point) > 1:
        terms.append("accumulation")
    return terms


def engine_points(data: dict[str, Any], ids: list[str] | None = None) -> list[dict[str, Any]]:
    """The scored DDP points the engine can price as the validation does (``ids``: these only): every one whose model
    has a layer table, and the ones of other models that none of :func:`own_terms` applies to (their table is
    :func:`even_table`, the validation's own assumption)."""
    out = []
    for p in data["points"]:
        if p["kind"] != "ddp_throughput" or p.get("role", "validate") != "validate":
            continue
        if "workload" not in data["models"][p["model"]] and own_terms(data, p):
            continue
        if ids is None or p["id"] in ids:
            out.append(p)
    missing = sorted(set(ids or []) - {p["id"] for p in out})
    if missing:
        raise SystemExit(
            f"validation_engine: not a DDP point the engine prices as the validation: {', '.join(missing)}"
        )
    return out


def even_table(name: str, model: dict[str, Any], grad_bytes: float) -> str:
    """A layer table (CSV) that states what the validation assumes of a model without one: its ``ready_last_params``
    (an input embedding) first in forward with no compute, so its gradient is ready only when backward ends, then
    equal layers, so the rest of the gradient is ready evenly over backward; about two tensors a layer, as the
    model's ``tensors`` count has them. The engine counts 4 bytes a parameter, so the table's parameters are the
    gradient's bytes in 4-byte units (a model whose DDP all-reduces FP16 gradients has half its parameter count
    there) and the embedding holds the model's ``ready_last`` share of them."""
    params = round(grad_bytes / 4)
    last = round(model.get("ready_last_params", 0) * params / model["params"])
    n = max(1, round((model["tensors"] - (1 if last else 0)) / fw.TENSORS_PER_LAYER))
    rows = [f"# [E] {name}: the validation's even readiness (benchmarks/validation_engine.py even_table)"]
    rows.append("name,kind,params,forward_flops,activation_bytes")
    if last:
        rows.append(f"embed,embedding,{last},0,0")
    each, spare = divmod(params - last, n)
    rows += [f"layer{i},linear,{each + (1 if i < spare else 0)},1.0,0" for i in range(n)]
    return "\n".join(rows) + "\n"


def write_workload(root: Path, data: dict[str, Any], point: dict[str, Any]) -> str:
    """The workload the engine charges for the point, written under ``root`` when its model has no shipped one (an
    :func:`even_table` and a workloads.yaml entry); its name."""
    model = data["models"][point["model"]]
    if "workload" in model:
        return str(model["workload"])
    name = f"validation-{point['model']}"
    grad = float(point.get("grad_bytes", model["grad_bytes"]))
    (root / "hardware_profiles" / "layers").mkdir(parents=True, exist_ok=True)
    (root / "hardware_profiles" / "layers" / f"{name}.csv").write_text(even_table(name, model, grad), encoding="utf-8")
    entry = {
        "train_flops_per_sample": 1.0,  # unread: the profile's throughput prices a sample, the table's shares order it
        "param_bytes": grad,
        "input": "1",
        "source": f"[E] {point['model']} as benchmarks/data/emulator_points.yaml describes it (validation_engine)",
        "layers": f"layers/{name}.csv",
    }
    table = {"schema_version": 1, "workloads": {name: entry}}
    (root / "hardware_profiles" / "workloads.yaml").write_text(yaml.safe_dump(table), encoding="utf-8")
    return name


def engine_profile(data: dict[str, Any], point: dict[str, Any], noise: bool, workload: str) -> dict[str, Any]:
    """The point's cluster as a profile file's contents, charging ``workload`` at the 1-GPU row's speed."""
    gpu = data["clusters"][point["cluster"]]["gpu"]
    t_fixed, peak = compute_figures(data, point, gpu)
    profile = cluster_profile(data, point["cluster"], point["gpus"], t_fixed, peak).model_dump(
        mode="json", exclude_none=True
    )
    for node in profile["nodes"]:
        for device in node["devices"]:
            device["throughput_samples_per_s"] = {workload: peak * proxy_batch(point)[1]}
            device["step_overhead_ms"] = {workload: t_fixed * 1000.0}
    profile["name"] = PROFILE
    if noise:
        profile["noise"] = {
            "compute_cv": fw.STEP_CV,
            "gpu_cv": fw.GPU_CV,
            "source": "[E] the framework's defaults (distrepro/timing/framework.py: STEP_CV, GPU_CV)",
        }
    return profile


def proxy_batch(point: dict[str, Any]) -> tuple[int, float]:
    """The proxy's batch per worker and the factor the 1-GPU row's throughput is scaled by for it: the step charged
    is ``t_fixed + batch / (peak x factor)`` = ``t_fixed + tokens_per_gpu / peak``, the point's own."""
    tokens = int(point["tokens_per_gpu"])
    batch = min(tokens, PROXY_BATCH)
    return batch, batch / tokens


def engine_step_s(point: dict[str, Any], workload: str, seed: int) -> float:
    """Seconds per step of one engine run on the profile written under ``DISTREPRO_PATH`` (after the warm-up)."""
    from distrepro.config.run_config import validate_config
    from distrepro.job.resolve import build_job
    from distrepro.orchestration.campaign import get_engine

    batch = proxy_batch(point)[0]
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
            "batch_size": batch,
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
    with tempfile.TemporaryDirectory(prefix="validation-engine-") as root:
        (Path(root) / "hardware_profiles").mkdir()
        workload = write_workload(Path(root), data, point)
        text = yaml.safe_dump(engine_profile(data, point, noise, workload), sort_keys=False)
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
        "own_terms": own_terms(data, point),
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
