"""Throttling fidelity: does throttled wall-clock time follow the virtual clock's prediction?

Runs AR-SGD on ``hetero-2fast-2slow`` (2 fast + 2 half-speed workers) under ``engine: dist`` with
``throttle: {enabled: true}`` through the normal campaign path (``distrepro.orchestration.campaign.run_campaign``,
MLflow in a private sqlite store), then reads back, per evaluation point, the throttled time
(``time/throttled_s`` = rank 0's wall time since the start of training / dilation) and the virtual
clock's prediction for the same run (``time/emulated_s``), and the tags the engine writes:
``distrepro.throttle.dilation``, ``distrepro.throttle.calibration`` (real/virtual ratios of
compute and of a gradient all-reduce) and ``distrepro.throttle.max_late_s`` (the furthest any rank
fell behind its pacing schedule, in wall seconds). Relative error = throttled / emulated - 1, at every evaluation,
over every interval between evaluations, at the end and at the time-to-target.

Variants: ``--workloads resnet18_cifar_32 none``: time charged as ResNet-18/CIFAR (compute
dominates the virtual step) or as the trained proxy ``small_cnn`` itself (communication
dominates). Evaluations are untimed in the virtual clock but take real time on rank 0; the
script times one evaluation of the same model offline (``eval_wall_s``) so its share of the
error can be told apart (``eval_wall_s / dilation``).

Run ``python benchmarks/dist_fidelity.py --help``; figures and commands live in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from result_json import write_results

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

OUT_DIR = REPO / "benchmarks" / "out"


def make_config(args: argparse.Namespace, workload: str | None, rep: int) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "name": f"dist-fidelity-{workload or 'proxy'}-{rep}",
        "method": "ar_sgd",
        "method_params": {"lr": 0.05, "momentum": 0.9},
        "profile": args.profile,
        "dataset": {
            "name": "synthetic",
            "params": {"image_size": 16, "train_size": args.train_size, "test_size": args.test_size},
        },
        "model": {"name": "small_cnn"},
        "batch_size": args.batch_size,
        "emulated_workload": workload,
        "budget": {"epochs": args.epochs},
        "eval": {"times": args.evals},
        "target": {"metric": "val_accuracy", "value": args.target},
        "engine": "dist",
        "dist": {"timeout_s": 300, "backend": args.backend},
        "throttle": {"enabled": True, "margin": args.margin},
        "seeds": [0],
    }
    if args.dilation is not None:
        cfg["throttle"]["dilation"] = args.dilation
    return cfg


def eval_wall_s(cfg_dict: dict[str, Any], threads: int) -> float:
    """Median wall time of one evaluation of the test set (what rank 0 does at an eval point)."""
    import torch

    from distrepro.config.run_config import validate_config
    from distrepro.engine.evaluation import evaluate
    from distrepro.engine.streams import iterate_eval
    from distrepro.job.resolve import build_job

    job = build_job(validate_config(cfg_dict), 0)
    model = job.make_model()
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        evaluate(model, iterate_eval(job.bundle, job.config.eval.batch_size))
        times.append(time.perf_counter() - t)
    torch.set_num_threads(old)
    return statistics.median(times[1:])


def one_run(args: argparse.Namespace, workload: str | None, rep: int, uri: str) -> dict[str, Any]:
    import mlflow

    from distrepro.config.run_config import validate_config
    from distrepro.orchestration.campaign import run_campaign

    cfg_dict = make_config(args, workload, rep)
    cfg = validate_config(cfg_dict)
    t0 = time.monotonic()
    res = run_campaign(cfg, show_progress=False, tracking_uri=uri)
    total = time.monotonic() - t0
    cell = res.cells[0]
    client = mlflow.MlflowClient(uri)
    run = client.get_run(cell.run_id)
    tags = run.data.tags

    def history(key: str) -> dict[int, float]:
        return {m.step: m.value for m in client.get_metric_history(cell.run_id, key)}

    thr, emu, wall = history("time/throttled_s"), history("time/emulated_s"), history("time/wall_s")
    acc = history("val_accuracy")
    dilation = float(tags["distrepro.throttle.dilation"])
    points = []
    prev_t = prev_e = 0.0
    for step in sorted(emu):
        e, t = emu[step], thr[step]
        points.append(
            {
                "step": step,
                "emulated_s": e,
                "throttled_s": t,
                "wall_s": wall[step],
                "val_accuracy": acc.get(step),
                "rel_err": t / e - 1,
                "interval_rel_err": (t - prev_t) / (e - prev_e) - 1 if e > prev_e else float("nan"),
            }
        )
        prev_t, prev_e = t, e
    ev = eval_wall_s(cfg_dict, max(1, (os.cpu_count() or 1) // 4))
    for pt in points:  # the stamp is taken after this evaluation ran: estimate the error without it
        pt["rel_err_wo_eval"] = (pt["throttled_s"] - ev / dilation) / pt["emulated_s"] - 1
    result = cell.result
    ttt_emu = result.time_to_target_s
    ttt_thr = thr.get(result.step_to_target) if result.step_to_target is not None else None
    calibration = json.loads(tags.get("distrepro.throttle.calibration") or "{}")
    return {
        "workload": workload or "none (proxy small_cnn)",
        "rep": rep,
        "run_id": cell.run_id,
        "campaign_wall_s": total,
        "train_wall_s": result.wall_s,
        "dilation": dilation,
        "calibration": calibration,
        "late_s": float(tags.get("distrepro.throttle.max_late_s", "nan")),
        "pinning": tags.get("distrepro.pinning"),
        "points": points,
        "final_rel_err": points[-1]["rel_err"],
        "ttt_emulated_s": ttt_emu,
        "ttt_throttled_s": ttt_thr,
        "ttt_rel_err": (ttt_thr / ttt_emu - 1) if (ttt_emu and ttt_thr) else None,
        "step_to_target": result.step_to_target,
        "final_val_accuracy": result.final.metrics.get("val_accuracy"),
        "eval_wall_s": ev,
        "load1_after": os.getloadavg()[0],
    }


def table(headers: list[str], rows: list[list[Any]]) -> str:
    def fmt(v: Any) -> str:
        if v is None:
            return "–"
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def pct(x: float | None) -> str:
    return "–" if x is None or x != x else f"{100 * x:+.1f}%"


def report(runs: list[dict[str, Any]]) -> str:
    out = ["### Throttling fidelity: summary per run\n"]
    out.append(
        table(
            [
                "workload",
                "rep",
                "dilation D",
                "calibration (compute / comm ratio)",
                "max late s (any rank)",
                "train wall s",
                "emulated s (end)",
                "throttled s (end)",
                "error at end",
                "max abs error at evals",
                "end error without the eval (est.)",
                "time-to-target emu / throttled s",
                "error TTT",
                "eval wall s / D",
                "load avg",
            ],
            [
                [
                    r["workload"],
                    r["rep"],
                    f"{r['dilation']:.4g}",
                    f"{r['calibration'].get('compute_ratio', 0):.3g} / {r['calibration'].get('comm_ratio', 0):.3g}",
                    r["late_s"],
                    r["train_wall_s"],
                    r["points"][-1]["emulated_s"],
                    r["points"][-1]["throttled_s"],
                    pct(r["final_rel_err"]),
                    pct(max(abs(p["rel_err"]) for p in r["points"])),
                    pct(r["points"][-1]["rel_err_wo_eval"]),
                    f"{r['ttt_emulated_s']:.3f} / {r['ttt_throttled_s']:.3f}" if r["ttt_rel_err"] is not None else "–",
                    pct(r["ttt_rel_err"]),
                    r["eval_wall_s"] / r["dilation"],
                    r["load1_after"],
                ]
                for r in runs
            ],
        )
    )
    for r in runs:
        out.append(f"\n#### {r['workload']}, rep {r['rep']} (D = {r['dilation']:.4g}): per evaluation point\n")
        out.append(
            table(
                [
                    "step",
                    "val_acc",
                    "emulated s",
                    "throttled s",
                    "error",
                    "error of the interval",
                    "error without this eval's wall time (est.)",
                ],
                [
                    [
                        p["step"],
                        p["val_accuracy"],
                        p["emulated_s"],
                        p["throttled_s"],
                        pct(p["rel_err"]),
                        pct(p["interval_rel_err"]),
                        pct(p["rel_err_wo_eval"]),
                    ]
                    for p in r["points"]
                ],
            )
        )
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="hetero-2fast-2slow")
    ap.add_argument(
        "--workloads",
        nargs="+",
        default=["resnet18_cifar_32", "none"],
        help="emulated_workload per variant; 'none' charges the proxy model itself",
    )
    ap.add_argument("--reps", type=int, default=2, help="runs per variant (default 2)")
    ap.add_argument("--epochs", type=float, default=2.0, help="budget in epochs (default 2)")
    ap.add_argument("--evals", type=int, default=8, help="evaluation points (default 8)")
    ap.add_argument("--target", type=float, default=0.6, help="val_accuracy target for time-to-target")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--train-size", type=int, default=4096)
    ap.add_argument("--test-size", type=int, default=1024)
    ap.add_argument("--margin", type=float, default=1.5, help="throttle.margin (default 1.5, the config default)")
    ap.add_argument("--dilation", type=float, default=None, help="fixed throttle.dilation (default: calibrate)")
    ap.add_argument(
        "--backend", choices=["auto", "gloo", "nccl"], default="auto", help="dist.backend (auto: nccl on 1 GPU/rank)"
    )
    ap.add_argument("--out", default=str(OUT_DIR / "dist_fidelity.json"), help="JSON results file")
    ap.add_argument(
        "--mlflow-dir",
        default=str(OUT_DIR / "dist_fidelity_mlflow"),
        help="folder of the sqlite MLflow store the runs are logged to (kept for inspection)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    store = Path(args.mlflow_dir) if args.mlflow_dir else Path(tempfile.mkdtemp(prefix="dist-fidelity-mlflow-"))
    store.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{store / 'mlflow.db'}"
    runs = []
    t_start = time.monotonic()
    for rep in range(args.reps):
        for w in args.workloads:
            workload = None if w == "none" else w
            r = one_run(args, workload, rep, uri)
            runs.append(r)
            print(
                f"{r['workload']} rep {rep}: D={r['dilation']:.4g} end error {pct(r['final_rel_err'])} "
                f"TTT error {pct(r['ttt_rel_err'])} late {r['late_s']:.3f}s wall {r['train_wall_s']:.1f}s",
                file=sys.stderr,
                flush=True,
            )
    print(report(runs))
    import torch

    machine = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "backend": "gloo",
    }
    write_results(args.out, "dist_fidelity", machine, vars(args), {"runs": runs}, t_start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
