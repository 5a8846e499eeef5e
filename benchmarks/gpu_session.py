"""One lent GPU, one call: calibrate the shipped workloads on CUDA (FP32 and AMP, several batch sizes), run the
``gpu``-marked test, and train one ``--scale gpu`` reproduction end to end on a CIFAR-10-format folder.

A GPU machine is lent to some sessions for minutes, so everything that needs one is in this one script, timed
with a guard per step, writing what it measured under ``--out`` (profiles graded ``[M]``, a CSV of every timed
step, the logs). Nothing here is needed by the test suite; its figures go to BENCHMARKS.md ("GPU recipes").

    python benchmarks/gpu_session.py --out "$OUT"                      # on the GPU machine
    python benchmarks/gpu_session.py --out "$DIR" --device cpu --quick  # the same path on a CPU, in a minute

The end-to-end reproduction trains on *random* images in CIFAR-10's file format (no dataset can be fetched
there): it exercises the GPU path (device placement, deterministic kernels, MLflow, the report), not accuracy.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: workload → per-device batches timed (the GPU recipes' ResNet-18 on 32 px; the papers' ImageNet-size models)
BATCHES = {
    "resnet18_cifar_32": [32, 64, 128, 256, 512],
    "resnet50_in1k_224": [16, 32, 64, 128],
    "resnet152_in1k_224": [16, 32, 64],
    "vit_b16_224": [16, 32, 64, 128],
}
QUICK = {"resnet18_cifar_32": [1, 2], "resnet50_in1k_224": [1, 2]}


def _step(title: str) -> float:
    print(f"\n== {title} ({time.strftime('%H:%M:%S')})", flush=True)
    return time.perf_counter()


def calibrate_all(out: Path, device: str, quick: bool, warmup: int, repeats: int) -> None:
    """Every workload × precision, in this process (one torch import); one CSV row per timed batch."""
    from distrepro.training.calibration import calibrate, write_profile

    precisions = ["fp32", "amp"] if device == "cuda" else ["fp32"]
    with (out / "calibration.csv").open("w", newline="") as fh:
        rows = csv.writer(fh)
        rows.writerow(["workload", "precision", "batch", "median_wall_ms", "median_cpu_ms", "t0_ms", "peak_per_s"])
        for precision in precisions:
            for workload, batches in (QUICK if quick else BATCHES).items():
                t0 = time.perf_counter()
                try:
                    name, entry, fit, timings = calibrate(
                        workload, device, precision, batches, warmup, repeats, f"measured-{device}-{precision}"
                    )
                except Exception as exc:
                    print(f"{workload} {precision}: FAILED {type(exc).__name__}: {exc}", flush=True)
                    continue
                write_profile(out / f"measured-{device}-{precision}.yaml", name, entry, into_shipped=False)
                for t in timings:
                    rows.writerow(
                        [
                            workload,
                            precision,
                            t.batch,
                            f"{t.median_wall_s * 1e3:.3f}",
                            f"{t.median_cpu_s * 1e3:.3f}",
                            f"{fit.t0_s * 1e3:.3f}",
                            f"{fit.peak_samples_per_s:.1f}",
                        ]
                    )
                fh.flush()
                per = ", ".join(f"b{t.batch} {t.median_wall_s * 1e3:.1f}" for t in timings)
                print(
                    f"{workload} {precision}: ms/step {per}; fit t0 {fit.t0_s * 1e3:.2f} ms, peak "
                    f"{fit.peak_samples_per_s:.0f} samples/s ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )


def _run(cmd: list[str], log: Path, timeout: int, env: dict[str, str]) -> int:
    with log.open("w") as fh:
        try:
            rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, env=env, cwd=REPO).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    tail = log.read_text(errors="replace").splitlines()[-12:]
    print(f"rc {rc}: {' '.join(cmd[2:6])} ...\n  " + "\n  ".join(tail), flush=True)
    return rc


def end_to_end(out: Path, device: str, quick: bool, timeout: int) -> None:
    """``distrepro reproduce chao --scale gpu`` on random CIFAR-10-format images, shortened, into its own store."""
    sys.path.insert(0, str(REPO / "tests" / "_support"))
    from imagefolders import write_fake_cifar

    scratch = Path(tempfile.mkdtemp(prefix="gpu_session_"))  # not under --out: only the results travel back
    data = scratch / "cifar"
    if not data.exists():
        write_fake_cifar(data, per_batch=64 if quick else 2000, n_test=10)  # its test labels are 0..n_test-1
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{scratch / 'mlflow.db'}"}
    steps = 4 if quick else 200
    cmd = [
        sys.executable, "-m", "distrepro.cli", "reproduce", "chao", "--scale", "gpu", "--seeds", "100",
        "--no-progress", "--no-sensitivity",
        "--set", f"dataset.root={data}", "--set", "dataset.params.verify_checksums=false",
        "--set", f"budget={{steps: {steps}}}", "--set", "eval={times: 2, batch_size: 256}",
        "--set", f"device={device}",
    ]  # fmt: skip
    if quick:
        cmd += ["--set", "model.params.width=4"]
    _run(cmd, out / "reproduce_chao_gpu.log", timeout, env)
    report = REPO / "reports" / "chao" / "report.md"
    if report.is_file():
        shutil.copy(report, out / "report_chao_gpu.md")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for profiles, CSV and logs")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny batches and steps: check the path, not the machine")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--skip", default="", help="comma-separated: calibrate, test, e2e")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}

    t = _step("environment")
    import torch

    print(f"torch {torch.__version__}, cuda {torch.version.cuda}, available {torch.cuda.is_available()}")
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        print(f"{p.name}, {p.total_memory / 2**30:.1f} GiB, {p.multi_processor_count} SMs; load {os.getloadavg()}")
    if "calibrate" not in skip:
        t = _step("calibrate")
        calibrate_all(
            args.out, args.device, args.quick, 1 if args.quick else args.warmup, 2 if args.quick else args.repeats
        )
        print(f"calibrate: {time.perf_counter() - t:.0f} s")
    if "test" not in skip and args.device == "cuda":
        t = _step("gpu-marked test")
        test = [
            sys.executable,
            "-m",
            "pytest",
            "tests/methods/test_gpu_scale.py",
            "-m",
            "gpu",
            "-q",
            "-p",
            "no:cacheprovider",
        ]
        _run(test, args.out / "pytest_gpu.log", 240, env)
    if "e2e" not in skip:
        t = _step("reproduce chao --scale gpu, end to end")
        end_to_end(args.out, args.device, args.quick, 300)
        print(f"end to end: {time.perf_counter() - t:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
