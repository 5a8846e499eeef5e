"""``distrepro calibrate WORKLOAD``: measure step time against per-device batch here, write an ``[M]`` profile entry.

The measuring and fitting are :mod:`distrepro.training.calibration` and :mod:`distrepro.hardware.calibrate`; this
module is the command line: arguments, where the entry goes, what is printed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _target(args: argparse.Namespace, name: str) -> Path | None:
    """``--out``, else the first ``--root``'s ``hardware_profiles/NAME.yaml``, else None (standard output)."""
    if args.out:
        return Path(args.out)
    if args.root:
        return Path(args.root[0]) / "hardware_profiles" / f"{name}.yaml"
    return None


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from distrepro.cli.common import check_output
    from distrepro.hardware.calibrate import single_device_profile
    from distrepro.training.calibration import calibrate, dump_yaml, parse_batches, write_profile

    if args.out:  # before the minutes of measuring
        check_output(args.out)

    from distrepro.hardware.device import deterministic_cuda

    name, entry, fit, timings = calibrate(
        args.workload,
        args.device,
        args.precision,
        parse_batches(args.batches),
        args.warmup,
        args.repeats,
        args.name,
        deterministic_cuda if args.deterministic else None,
    )
    for t in timings:
        print(
            f"batch {t.batch}: {t.median_wall_s * 1e3:.2f} ms wall, {t.median_cpu_s * 1e3:.2f} ms CPU per step "
            f"(median of {len(t.wall_s)})",
            file=sys.stderr,
        )
    target = _target(args, name)
    if target is None:
        print(dump_yaml(single_device_profile(name, entry)))
        return 0
    write_profile(target, name, entry, args.into_shipped)
    print(f"t0 = {fit.t0_s * 1e3:.3f} ms, peak {fit.peak_samples_per_s:.2f} samples/s; written to {target}")
    return 0


def add_parser(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    """The ``calibrate`` subcommand's arguments."""
    cal = sub.add_parser(
        "calibrate",
        parents=parents,
        help="measure step time against batch on this machine's CPU or GPU; write a profile entry graded [M]",
        description="Time training steps of WORKLOAD's architecture at each --batches size on --device, fit "
        "t0 + b/peak (the form the engine charges) and write a one-device profile: --out FILE, else the first "
        "--root's hardware_profiles/, else standard output.",
    )
    cal.add_argument("workload", help="emulated workload (hardware_profiles/workloads.yaml)")
    cal.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to time (default cpu)")
    cal.add_argument("--precision", choices=["fp32", "amp"], default="fp32", help="fp32, or amp (cuda only)")
    cal.add_argument("--batches", default="1,2,4,8", help="per-device batch sizes, comma-separated (default 1,2,4,8)")
    cal.add_argument("--warmup", type=int, default=3, help="discarded steps per batch (default 3)")
    cal.add_argument("--repeats", type=int, default=5, help="timed steps per batch (default 5)")
    cal.add_argument("--name", help="profile name (default calibrated-<host>-<device>)")
    cal.add_argument("--out", metavar="FILE", help="write (or extend) this profile file")
    cal.add_argument("--into-shipped", action="store_true", help="allow writing into the shipped profiles folder")
    cal.add_argument(
        "--deterministic",
        action="store_true",
        help="time CUDA with the deterministic kernels training runs under (about 11%% slower on an H100): for a "
        "profile that prices this suite's own GPU runs; default: torch's kernels, for a profile of the hardware "
        "as a paper ran it (no effect on --device cpu)",
    )
    cal.set_defaults(func=_cmd_calibrate)
